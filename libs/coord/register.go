package coord

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	registryv1 "github.com/hermod/hermod/libs/api/hermod/registry/v1"
)

// ErrClosed is returned by Update after Close.
var ErrClosed = errors.New("registration closed")

// Registration keeps one endpoint registered: its key is bound to a lease
// that a goroutine owned by the Registration keeps alive. When the lease is
// lost (revoked, or expired while etcd was unreachable for longer than the
// TTL) the goroutine grants a new lease and writes the key again, retrying
// with backoff until it succeeds or the Registration is closed.
//
// The methods are safe for concurrent use.
type Registration struct {
	cli       *clientv3.Client
	key       string
	pool      string
	name      string
	ttl       int64 // seconds, as asked of etcd
	opts      options
	log       *slog.Logger
	cancel    context.CancelFunc
	done      chan struct{}
	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error

	// sem serializes the writes of the key (Update and re-registration), so
	// that a re-registration never writes an older value than an Update. It
	// is a channel rather than a mutex so that waiting honours a context.
	sem chan struct{}

	mu    sync.Mutex
	ep    *registryv1.Endpoint // the value to write; never mutated once stored
	lease clientv3.LeaseID     // the lease the key was last written with
}

// Register writes ep under EndpointKey(ep.Pool, ep.Name), bound to a new
// lease of the given TTL (at least one second; etcd rounds it up to whole
// seconds and to its minimum TTL), and keeps it registered until Close. ctx
// bounds the first registration only: Register returns an error, and leaves
// nothing behind, if it fails. The caller may reuse ep: Register keeps a
// copy, whose registered_at it sets to now when unset.
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
	r := &Registration{
		cli:  cli,
		key:  key,
		pool: ep.GetPool(),
		name: ep.GetName(),
		ttl:  int64(math.Ceil(ttl.Seconds())),
		opts: o,
		log:  o.logger.With("pool", ep.GetPool(), "endpoint", ep.GetName()),
		done: make(chan struct{}),
		sem:  make(chan struct{}, 1),
		ep:   ep,
	}
	lease, granted, err := r.grantAndPut(ctx, ep)
	if err != nil {
		return nil, fmt.Errorf("register endpoint %s: %w", key, err)
	}
	// The goroutine outlives ctx: it keeps ctx's values, not its deadline.
	loopCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	ka, err := cli.KeepAlive(loopCtx, lease)
	if err != nil {
		cancel()
		r.revoke(ctx, lease)
		return nil, fmt.Errorf("register endpoint %s: keep lease alive: %w", key, err)
	}
	r.lease = lease
	r.cancel = cancel
	r.log.Info("endpoint registered", "key", key, "lease_id", int64(lease), "ttl_seconds", granted)
	go r.run(loopCtx, ka)
	return r, nil
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
func (r *Registration) Key() string { return r.key }

// LeaseID returns the lease the key was last written with.
func (r *Registration) LeaseID() clientv3.LeaseID {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lease
}

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
	if ep == nil {
		return fmt.Errorf("update endpoint %s: nil endpoint", r.key)
	}
	if ep.GetPool() != r.pool || ep.GetName() != r.name {
		return fmt.Errorf("update endpoint %s: pool and name cannot change (got %q/%q): %w",
			r.key, ep.GetPool(), ep.GetName(), ErrInvalidName)
	}
	ep = proto.CloneOf(ep)
	select {
	case r.sem <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("update endpoint %s: %w", r.key, ctx.Err())
	}
	defer func() { <-r.sem }()
	if r.closed.Load() {
		return fmt.Errorf("update endpoint %s: %w", r.key, ErrClosed)
	}
	r.mu.Lock()
	if ep.RegisteredAt == nil {
		ep.RegisteredAt = proto.CloneOf(r.ep.GetRegisteredAt())
	}
	lease := r.lease
	r.mu.Unlock()
	value, err := EncodeEndpoint(ep)
	if err != nil {
		return fmt.Errorf("update endpoint %s: %w", r.key, err)
	}
	r.mu.Lock()
	r.ep = ep
	r.mu.Unlock()
	if _, err := r.cli.Put(ctx, r.key, string(value), clientv3.WithLease(lease)); err != nil {
		return fmt.Errorf("update endpoint %s: %w", r.key, err)
	}
	return nil
}

// Close stops the keepalive goroutine, waits for it and revokes the lease,
// so that the endpoint disappears at once. If the revoke fails (etcd is
// unreachable, or the client was closed), the endpoint disappears when the
// lease expires. Calls after the first return the first one's result.
func (r *Registration) Close(ctx context.Context) error {
	r.closeOnce.Do(func() {
		r.closed.Store(true)
		r.cancel()
		<-r.done
		lease := r.LeaseID()
		if err := r.cli.Ctx().Err(); err != nil {
			// A closed client would only retry the revoke until ctx ends.
			r.closeErr = fmt.Errorf("deregister endpoint %s: etcd client closed, the lease expires after its TTL: %w", r.key, err)
			return
		}
		if _, err := r.cli.Revoke(ctx, lease); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
			r.closeErr = fmt.Errorf("deregister endpoint %s: revoke lease: %w", r.key, err)
			return
		}
		r.log.Info("endpoint deregistered", "key", r.key, "lease_id", int64(lease))
	})
	return r.closeErr
}

// run drains the keepalive responses and registers again whenever the lease
// is lost, until ctx is canceled (Close) or the client is closed.
func (r *Registration) run(ctx context.Context, ka <-chan *clientv3.LeaseKeepAliveResponse) {
	defer close(r.done)
	for {
		for open := true; open; {
			select {
			case <-ctx.Done():
				return
			case _, open = <-ka:
			}
		}
		if ctx.Err() != nil {
			return
		}
		if r.cli.Ctx().Err() != nil {
			r.log.Warn("etcd client closed; endpoint no longer kept registered", "key", r.key)
			return
		}
		r.log.Warn("endpoint lease lost; registering again", "key", r.key, "lease_id", int64(r.LeaseID()))
		if ka = r.reregister(ctx); ka == nil {
			return
		}
	}
}

// reregister grants a new lease and writes the key with it, with backoff,
// until it succeeds (it returns the new lease's keepalive channel) or ctx is
// canceled or the client closed (it returns nil).
func (r *Registration) reregister(ctx context.Context) <-chan *clientv3.LeaseKeepAliveResponse {
	bo := r.opts.backoff()
	for {
		ka, err := r.reregisterOnce(ctx)
		if ka != nil {
			return ka
		}
		if ctx.Err() != nil {
			return nil
		}
		if r.cli.Ctx().Err() != nil {
			r.log.Warn("etcd client closed; endpoint no longer kept registered", "key", r.key)
			return nil
		}
		delay := bo.delay()
		r.log.Warn("register endpoint again failed; retrying", "key", r.key, "error", err, "retry_in", delay)
		if !sleep(ctx, delay) {
			return nil
		}
	}
}

func (r *Registration) reregisterOnce(ctx context.Context) (<-chan *clientv3.LeaseKeepAliveResponse, error) {
	select {
	case r.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-r.sem }()

	r.mu.Lock()
	ep := proto.CloneOf(r.ep)
	old := r.lease
	r.mu.Unlock()
	ep.RegisteredAt = timestamppb.Now()

	actx, cancel := context.WithTimeout(ctx, r.opts.requestTimeout)
	defer cancel()
	lease, granted, err := r.grantAndPut(actx, ep)
	if err != nil {
		return nil, err
	}
	ka, err := r.cli.KeepAlive(ctx, lease)
	if err != nil {
		r.revoke(ctx, lease)
		return nil, fmt.Errorf("keep lease alive: %w", err)
	}
	r.mu.Lock()
	r.ep = ep
	r.lease = lease
	r.mu.Unlock()
	// The old lease is normally gone; when it is not (the keepalive stream
	// timed out while etcd kept it), it holds nothing now.
	r.revoke(ctx, old)
	r.log.Info("endpoint registered again", "key", r.key, "lease_id", int64(lease), "ttl_seconds", granted)
	return ka, nil
}

// grantAndPut grants a lease and writes ep bound to it. On failure it revokes
// the lease it granted, if any. It returns the lease and its granted TTL.
func (r *Registration) grantAndPut(ctx context.Context, ep *registryv1.Endpoint) (clientv3.LeaseID, int64, error) {
	value, err := EncodeEndpoint(ep)
	if err != nil {
		return 0, 0, err
	}
	grant, err := r.cli.Grant(ctx, r.ttl)
	if err != nil {
		return 0, 0, fmt.Errorf("grant lease: %w", err)
	}
	if _, err := r.cli.Put(ctx, r.key, string(value), clientv3.WithLease(grant.ID)); err != nil {
		// The put may have been applied before ctx ended: the revoke removes
		// the key with the lease.
		r.revoke(ctx, grant.ID)
		return 0, 0, fmt.Errorf("put %s: %w", r.key, err)
	}
	return grant.ID, grant.TTL, nil
}

// revoke revokes a lease best-effort, within the request timeout even when
// ctx has ended.
func (r *Registration) revoke(ctx context.Context, lease clientv3.LeaseID) {
	if lease == clientv3.NoLease || r.cli.Ctx().Err() != nil {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.opts.requestTimeout)
	defer cancel()
	if _, err := r.cli.Revoke(rctx, lease); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		r.log.Debug("revoke lease failed", "key", r.key, "lease_id", int64(lease), "error", err)
	}
}
