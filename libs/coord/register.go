package coord

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	registryv1 "github.com/hermod/hermod/libs/api/hermod/registry/v1"
)

// ErrClosed is returned by Update after Close, and reported by
// Leadership.Err after Close.
var ErrClosed = errors.New("closed")

// Registration keeps one endpoint registered: its key is bound to a lease
// that a goroutine owned by the Registration keeps alive. When the lease is
// lost (revoked, or expired while etcd was unreachable for longer than the
// TTL) the goroutine grants a new lease and writes the key again, retrying
// with backoff until it succeeds or the Registration is closed.
//
// The methods are safe for concurrent use.
type Registration struct {
	k    *leasedKey
	pool string
	name string

	mu sync.Mutex
	ep *registryv1.Endpoint // the value to write; never mutated once stored
}

// Register writes ep under EndpointKey(ep.Pool, ep.Name), bound to a new
// lease of the given TTL (at least one second; etcd rounds it up to whole
// seconds and to its minimum TTL), and keeps it registered until Close. ctx
// bounds the first registration only: Register returns an error, and leaves
// nothing behind, if it fails. The caller may reuse ep: Register keeps a
// copy, whose registered_at it sets to now when unset. When the lease is
// lost, the endpoint is registered again with registered_at set to then.
func Register(ctx context.Context, cli *clientv3.Client, ep *registryv1.Endpoint, ttl time.Duration, opts ...Option) (*Registration, error) {
	if cli == nil {
		return nil, errors.New("register endpoint: nil etcd client")
	}
	if err := validateEndpoint(ep); err != nil {
		return nil, fmt.Errorf("register endpoint: %w", err)
	}
	key := EndpointKey(ep.GetPool(), ep.GetName())
	if ttl < time.Second {
		return nil, fmt.Errorf("register endpoint %s: ttl %s is shorter than 1s", key, ttl)
	}
	ep = proto.CloneOf(ep)
	if ep.RegisteredAt == nil {
		ep.RegisteredAt = timestamppb.Now()
	}
	o := newOptions(opts)
	r := &Registration{pool: ep.GetPool(), name: ep.GetName(), ep: ep}
	k, err := startLeasedKey(ctx, cli, key, "endpoint", leaseSeconds(ttl), o,
		o.logger.With("pool", ep.GetPool(), "endpoint", ep.GetName()), r.value)
	if err != nil {
		return nil, fmt.Errorf("register endpoint %s: %w", key, err)
	}
	r.k = k
	return r, nil
}

// value is the leasedKey's value func: the current endpoint, with
// registered_at set to now when written again under a new lease.
func (r *Registration) value(rewrite bool) ([]byte, func(), error) {
	r.mu.Lock()
	ep := r.ep
	r.mu.Unlock()
	if rewrite {
		ep = proto.CloneOf(ep)
		ep.RegisteredAt = timestamppb.Now()
	}
	value, err := EncodeEndpoint(ep)
	if err != nil {
		return nil, nil, err
	}
	return value, func() {
		r.mu.Lock()
		r.ep = ep
		r.mu.Unlock()
	}, nil
}

func validateEndpoint(ep *registryv1.Endpoint) error {
	if ep == nil {
		return errors.New("nil endpoint")
	}
	if err := ValidatePoolName(ep.GetPool()); err != nil {
		return err
	}
	return ValidateEndpointName(ep.GetName())
}

// Key returns the endpoint's etcd key.
func (r *Registration) Key() string { return r.k.key }

// LeaseID returns the lease the key is written with. While the endpoint is
// registered again, it is the new lease from just before the key is written
// with it.
func (r *Registration) LeaseID() clientv3.LeaseID { return r.k.leaseID() }

// Endpoint returns a copy of the registered value.
func (r *Registration) Endpoint() *registryv1.Endpoint {
	r.mu.Lock()
	defer r.mu.Unlock()
	return proto.CloneOf(r.ep)
}

// Update writes ep as the endpoint's new value under the current lease. The
// pool and name cannot change. When ep has no registered_at, the current one
// is kept. The new value is kept even when the write fails (the lease may
// have just been lost): every later re-registration writes it.
func (r *Registration) Update(ctx context.Context, ep *registryv1.Endpoint) error {
	key := r.k.key
	if ep == nil {
		return fmt.Errorf("update endpoint %s: nil endpoint", key)
	}
	if ep.GetPool() != r.pool || ep.GetName() != r.name {
		return fmt.Errorf("update endpoint %s: pool and name cannot change (got %q/%q): %w",
			key, ep.GetPool(), ep.GetName(), ErrInvalidName)
	}
	ep = proto.CloneOf(ep)
	err := r.k.write(ctx, func() ([]byte, error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		if ep.RegisteredAt == nil {
			ep.RegisteredAt = proto.CloneOf(r.ep.GetRegisteredAt())
		}
		value, err := EncodeEndpoint(ep)
		if err != nil {
			return nil, err
		}
		r.ep = ep
		return value, nil
	})
	if err != nil {
		return fmt.Errorf("update endpoint %s: %w", key, err)
	}
	return nil
}

// Close stops the keepalive goroutine, waits for it and revokes the lease
// (within the request timeout), so that the endpoint disappears at once. If
// the revoke fails (etcd is unreachable, or the client was closed), the
// endpoint disappears when the lease expires. Calls after the first return
// the first one's result.
func (r *Registration) Close(ctx context.Context) error {
	if err := r.k.close(ctx); err != nil {
		return fmt.Errorf("deregister endpoint %s: %w", r.k.key, err)
	}
	return nil
}
