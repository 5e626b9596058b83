package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/hermod/hermod/libs/bus"
)

// Bounds of the start-up calls and of the flush at Close.
const (
	connectTimeout = 15 * time.Second
	streamsTimeout = 10 * time.Second
	flushTimeout   = 5 * time.Second
)

// Etcd connects to the configured etcd; Close closes the client.
func (s *Service) Etcd(ctx context.Context) (*clientv3.Client, error) {
	cctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	if s.config.Etcd.Username != "" && !s.config.Etcd.TLS.Set() {
		s.Log.Warn("etcd password sent without TLS: set --etcd-ca-file")
	}
	cli, err := s.config.Etcd.NewClient(cctx, s.config.EtcdEndpoints)
	if err != nil {
		return nil, err
	}
	s.OnClose(func() { _ = cli.Close() })
	return cli, nil
}

// NATS connects to the configured NATS, the connection named after the
// service and its replica; Close closes it.
func (s *Service) NATS(ctx context.Context) (*nats.Conn, error) {
	if urlHasPassword(s.config.NATSURL) {
		return nil, errors.New("the NATS URL carries a secret (a password or a token), which ps and logs would show: use --nats-user with --nats-password-file or HERMOD_NATS_PASSWORD, or --nats-token-file")
	}
	nc, err := s.config.NATS.Connect(ctx, s.config.NATSURL, s.Name+" "+s.Replica, bus.WithLogger(s.Log))
	if err != nil {
		return nil, err
	}
	s.OnClose(nc.Close)
	return nc, nil
}

// JetStream returns the JetStream of a connection with Hermod's streams
// and buckets in place (created or updated, with --stream-replicas
// replicas).
func (s *Service) JetStream(ctx context.Context, nc *nats.Conn) (jetstream.JetStream, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	sctx, cancel := context.WithTimeout(ctx, streamsTimeout)
	defer cancel()
	limits := bus.DefaultLimits()
	limits.Replicas = s.config.StreamReplicas
	if err := bus.EnsureStreams(sctx, js, limits); err != nil {
		return nil, err
	}
	return js, nil
}

// Publisher returns an asynchronous publisher on nc, its metrics in the
// service's registry; Close flushes it (for a while) before the connection
// closes. what names the events, for the warning when some are left.
func (s *Service) Publisher(nc *nats.Conn, what string) (*bus.Publisher, error) {
	opts := []bus.Option{bus.WithLogger(s.Log), bus.WithRegisterer(s.Registry)}
	if s.config.PublishQueue > 0 {
		opts = append(opts, bus.WithQueueSize(s.config.PublishQueue))
	}
	pub, err := bus.NewPublisher(nc, opts...)
	if err != nil {
		return nil, err
	}
	s.OnClose(func() {
		ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
		defer cancel()
		if err := pub.Close(ctx); err != nil {
			s.Log.Warn(what+" left unpublished at shutdown", "error", err)
		}
	})
	return pub, nil
}

// Backends are a service's connections to etcd and NATS.
type Backends struct {
	Etcd      *clientv3.Client
	NATS      *nats.Conn
	JetStream jetstream.JetStream
}

// Connect connects to etcd and to NATS, with Hermod's streams in place
// (Etcd, NATS, JetStream); Close closes them.
func (s *Service) Connect(ctx context.Context) (Backends, error) {
	var b Backends
	var err error
	if b.Etcd, err = s.Etcd(ctx); err != nil {
		return Backends{}, err
	}
	if b.NATS, err = s.NATS(ctx); err != nil {
		return Backends{}, err
	}
	if b.JetStream, err = s.JetStream(ctx, b.NATS); err != nil {
		return Backends{}, err
	}
	return b, nil
}
