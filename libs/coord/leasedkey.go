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

	"github.com/hermod/hermod/libs/retry"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// leaseSeconds converts a TTL to the whole seconds asked of etcd.
func leaseSeconds(ttl time.Duration) int64 { return int64(math.Ceil(ttl.Seconds())) }

// leasedKey keeps one key bound to a lease that its goroutine keeps alive.
// When the lease is lost (revoked, or expired while etcd was unreachable for
// longer than the TTL) the goroutine grants a new lease and writes the key
// again, retrying with backoff until it succeeds or the key is closed. It is
// the mechanism under Registration and Membership.
type leasedKey struct {
	cli  *clientv3.Client
	key  string
	kind string // what the key holds, in log messages: "endpoint", "member"
	ttl  int64  // seconds, as asked of etcd
	opts options
	log  *slog.Logger

	// value returns the value to write under a new lease and a func, which
	// may be nil, to run once it is written. rewrite is false for the first
	// write and true after a lost lease. It runs with sem held.
	value func(rewrite bool) ([]byte, func(), error)

	cancel    context.CancelFunc
	done      chan struct{}
	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error

	// sem serializes the writes of the key (updates and rewrites), so that a
	// rewrite never writes an older value than an update. It is a channel
	// rather than a mutex so that waiting honours a context.
	sem chan struct{}

	// stale is set when a write failed after its value was taken as the
	// key's (an Update while etcd was unreachable): the lease may outlive
	// the outage, so no rewrite would come, and the key would keep the
	// older value for good. The goroutine writes the value again on the
	// next keepalive response, which says etcd answers again.
	stale atomic.Bool

	mu    sync.Mutex
	lease clientv3.LeaseID // the lease the key was last written with
}

// startLeasedKey writes the key under a new lease of ttl seconds and starts
// the goroutine that keeps it. ctx bounds the first write only; on failure
// nothing is left behind.
func startLeasedKey(ctx context.Context, cli *clientv3.Client, key, kind string, ttl int64, o options, log *slog.Logger,
	value func(rewrite bool) ([]byte, func(), error),
) (*leasedKey, error) {
	k := &leasedKey{
		cli:   cli,
		key:   key,
		kind:  kind,
		ttl:   ttl,
		opts:  o,
		log:   log,
		value: value,
		done:  make(chan struct{}),
		sem:   make(chan struct{}, 1),
	}
	v, commit, err := value(false)
	if err != nil {
		return nil, err
	}
	lease, granted, err := k.grantAndPut(ctx, v)
	if err != nil {
		return nil, err
	}
	if commit != nil {
		commit()
	}
	// The goroutine outlives ctx: it keeps ctx's values, not its deadline.
	loopCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	ka, err := cli.KeepAlive(loopCtx, lease)
	if err != nil {
		cancel()
		k.revoke(ctx, lease)
		return nil, fmt.Errorf("keep lease alive: %w", err)
	}
	k.cancel = cancel
	k.log.Info(kind+" registered", "key", key, "lease_id", int64(lease), "ttl_seconds", granted)
	go k.run(loopCtx, ka)
	return k, nil
}

// leaseID returns the lease the key was last written with.
func (k *leasedKey) leaseID() clientv3.LeaseID {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.lease
}

// write writes the value prepare returns under the current lease. prepare
// runs with the write lock held, after the closed check; when it fails,
// nothing is written.
func (k *leasedKey) write(ctx context.Context, prepare func() ([]byte, error)) error {
	select {
	case k.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-k.sem }()
	if k.closed.Load() {
		return ErrClosed
	}
	value, err := prepare()
	if err != nil {
		return err
	}
	_, err = k.cli.Put(ctx, k.key, string(value), clientv3.WithLease(k.leaseID()))
	k.stale.Store(err != nil)
	return err
}

// resync writes the current value again under the current lease, after a
// write failed (stale). A failure leaves the key stale for the next
// keepalive response to try again.
func (k *leasedKey) resync(ctx context.Context) {
	select {
	case k.sem <- struct{}{}:
	case <-ctx.Done():
		return
	}
	defer func() { <-k.sem }()
	if !k.stale.Load() {
		return // an update or a rewrite wrote it meanwhile
	}
	value, commit, err := k.value(false)
	if err != nil {
		k.log.Warn("write "+k.kind+" again failed", "key", k.key, "error", err)
		return
	}
	pctx, cancel := context.WithTimeout(ctx, k.opts.requestTimeout)
	defer cancel()
	if _, err := k.cli.Put(pctx, k.key, string(value), clientv3.WithLease(k.leaseID())); err != nil {
		k.log.Warn("write "+k.kind+" again failed; retrying on the next keepalive", "key", k.key, "error", err)
		return
	}
	if commit != nil {
		commit()
	}
	k.stale.Store(false)
	k.log.Info(k.kind+" written again after a failed update", "key", k.key, "lease_id", int64(k.leaseID()))
}

// close stops the goroutine, waits for it and revokes the lease, so that the
// key disappears at once. If the revoke fails (etcd is unreachable, or the
// client was closed), the key disappears when the lease expires. Calls after
// the first return the first one's result.
func (k *leasedKey) close(ctx context.Context) error {
	k.closeOnce.Do(func() {
		k.closed.Store(true)
		k.cancel()
		<-k.done
		lease := k.leaseID()
		if err := k.cli.Ctx().Err(); err != nil {
			// A closed client would only retry the revoke until ctx ends.
			k.closeErr = fmt.Errorf("etcd client closed, the lease expires after its TTL: %w", err)
			return
		}
		rctx, cancel := context.WithTimeout(ctx, k.opts.requestTimeout)
		defer cancel()
		if _, err := k.cli.Revoke(rctx, lease); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
			k.closeErr = fmt.Errorf("revoke lease: %w", err)
			return
		}
		k.log.Info(k.kind+" deregistered", "key", k.key, "lease_id", int64(lease))
	})
	return k.closeErr
}

// run drains the keepalive responses and writes the key again whenever the
// lease is lost, until ctx is canceled (close) or the client is closed.
func (k *leasedKey) run(ctx context.Context, ka <-chan *clientv3.LeaseKeepAliveResponse) {
	defer close(k.done)
	for {
		for open := true; open; {
			select {
			case <-ctx.Done():
				return
			case _, open = <-ka:
				if open && k.stale.Load() {
					k.resync(ctx)
				}
			}
		}
		if ctx.Err() != nil {
			return
		}
		if k.cli.Ctx().Err() != nil {
			k.log.Warn("etcd client closed; "+k.kind+" no longer kept registered", "key", k.key)
			return
		}
		k.log.Warn(k.kind+" lease lost; registering again", "key", k.key, "lease_id", int64(k.leaseID()))
		if ka = k.rewrite(ctx); ka == nil {
			return
		}
	}
}

// rewrite grants a new lease and writes the key with it, with backoff, until
// it succeeds (it returns the new lease's keepalive channel) or ctx is
// canceled or the client closed (it returns nil).
func (k *leasedKey) rewrite(ctx context.Context) <-chan *clientv3.LeaseKeepAliveResponse {
	bo := k.opts.backoff()
	for {
		ka, err := k.rewriteOnce(ctx)
		if ka != nil {
			return ka
		}
		if ctx.Err() != nil {
			return nil
		}
		if k.cli.Ctx().Err() != nil {
			k.log.Warn("etcd client closed; "+k.kind+" no longer kept registered", "key", k.key)
			return nil
		}
		delay := bo.NextBackOff()
		k.log.Warn("register "+k.kind+" again failed; retrying", "key", k.key, "error", err, "retry_in", delay)
		if !retry.Sleep(ctx, delay) {
			return nil
		}
	}
}

func (k *leasedKey) rewriteOnce(ctx context.Context) (<-chan *clientv3.LeaseKeepAliveResponse, error) {
	select {
	case k.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-k.sem }()

	value, commit, err := k.value(true)
	if err != nil {
		return nil, err
	}
	old := k.leaseID()
	actx, cancel := context.WithTimeout(ctx, k.opts.requestTimeout)
	defer cancel()
	lease, granted, err := k.grantAndPut(actx, value)
	if err != nil {
		return nil, err
	}
	ka, err := k.cli.KeepAlive(ctx, lease)
	if err != nil {
		k.revoke(ctx, lease)
		return nil, fmt.Errorf("keep lease alive: %w", err)
	}
	if commit != nil {
		commit()
	}
	k.stale.Store(false)
	// The old lease is normally gone; when it is not (the keepalive stream
	// timed out while etcd kept it), it holds nothing now.
	k.revoke(ctx, old)
	k.log.Info(k.kind+" registered again", "key", k.key, "lease_id", int64(lease), "ttl_seconds", granted)
	return ka, nil
}

// grantAndPut grants a lease and writes value bound to it. The new lease is
// the key's (leaseID) from before the put, so that whoever sees the key under
// it sees it as the key's lease too; on failure the previous one is restored
// and the new lease revoked. It returns the lease and its granted TTL.
func (k *leasedKey) grantAndPut(ctx context.Context, value []byte) (clientv3.LeaseID, int64, error) {
	grant, err := k.cli.Grant(ctx, k.ttl)
	if err != nil {
		return 0, 0, fmt.Errorf("grant lease: %w", err)
	}
	k.mu.Lock()
	prev := k.lease
	k.lease = grant.ID
	k.mu.Unlock()
	if _, err := k.cli.Put(ctx, k.key, string(value), clientv3.WithLease(grant.ID)); err != nil {
		k.mu.Lock()
		k.lease = prev
		k.mu.Unlock()
		// The put may have been applied before ctx ended: the revoke removes
		// the key with the lease.
		k.revoke(ctx, grant.ID)
		return 0, 0, fmt.Errorf("put %s: %w", k.key, err)
	}
	return grant.ID, grant.TTL, nil
}

// revoke revokes a lease best-effort, within the request timeout even when
// ctx has ended.
func (k *leasedKey) revoke(ctx context.Context, lease clientv3.LeaseID) {
	revokeLease(ctx, k.cli, lease, k.opts.requestTimeout, k.log)
}

// revokeLease revokes a lease best-effort, within timeout even when ctx has
// ended. A failure is logged at debug level: the lease expires anyway.
func revokeLease(ctx context.Context, cli *clientv3.Client, lease clientv3.LeaseID, timeout time.Duration, log *slog.Logger) {
	if lease == clientv3.NoLease || cli.Ctx().Err() != nil {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	if _, err := cli.Revoke(rctx, lease); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		log.Debug("revoke lease failed", "lease_id", int64(lease), "error", err)
	}
}
