package coord

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/hermod/hermod/libs/coord/etcddial"
)

// DefaultDialTimeout bounds the first connection of NewClient.
const DefaultDialTimeout = 5 * time.Second

// WithTLS makes NewClient speak TLS with cfg (the CA that verifies etcd
// and, for client-certificate authentication, the client's certificate).
// Endpoints are then host:port or https:// URLs. NewClient.
func WithTLS(cfg *tls.Config) Option {
	return func(o *options) { o.tls = cfg }
}

// WithCredentials makes NewClient authenticate as an etcd user (etcd's
// RBAC, after `etcdctl auth enable`). NewClient.
func WithCredentials(username, password string) Option {
	return func(o *options) { o.username, o.password = username, password }
}

// NewClient returns an etcd client of the cluster at endpoints (host:port or
// URLs), over TLS and as a user when WithTLS and WithCredentials say so
// (every etcd client of Hermod is made here). The client's own logging is
// off: services log what its calls return. It checks that the cluster
// answers within ctx (or DefaultDialTimeout), so that a wrong address,
// certificate or password fails at start rather than at first use.
func NewClient(ctx context.Context, endpoints []string, opts ...Option) (*clientv3.Client, error) {
	if len(endpoints) == 0 {
		return nil, errors.New("etcd client: no endpoint")
	}
	o := newOptions(opts)
	if err := checkClientOptions(endpoints, o); err != nil {
		return nil, err
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:            endpoints,
		DialTimeout:          DefaultDialTimeout,
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: 5 * time.Second,
		DialOptions:          etcddial.Options(),
		Logger:               zap.NewNop(),
		TLS:                  o.tls,
		Username:             o.username,
		Password:             o.password,
	})
	if errors.Is(err, context.DeadlineExceeded) {
		return nil, fmt.Errorf("etcd client for %v: no connection within %s (a wrong address, or TLS that does not match: the CA, a client certificate, TLS or not): %w", endpoints, DefaultDialTimeout, err)
	}
	if err != nil {
		return nil, fmt.Errorf("etcd client for %v: %w", endpoints, err)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultDialTimeout)
		defer cancel()
	}
	if _, err := cli.Get(ctx, "/hermod/", clientv3.WithCountOnly()); err != nil {
		_ = cli.Close()
		return nil, fmt.Errorf("etcd at %v does not answer: %w", endpoints, err)
	}
	return cli, nil
}

// checkClientOptions refuses settings that would silently not do what
// they say: the etcd client drops TLS for http:// endpoints, and a user
// needs a password (a user authenticated by certificate gives none).
func checkClientOptions(endpoints []string, o options) error {
	if o.tls != nil {
		for _, ep := range endpoints {
			if strings.HasPrefix(ep, "http://") {
				return fmt.Errorf("etcd client: endpoint %s is plain http but TLS is configured: use https:// or host:port", ep)
			}
		}
	}
	if o.username == "" && o.password != "" {
		return errors.New("etcd client: a password without a user name")
	}
	if o.username != "" && o.password == "" {
		return fmt.Errorf("etcd client: user %s has no password (a client certificate's common name authenticates without one)", o.username)
	}
	return nil
}
