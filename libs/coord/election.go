package coord

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/hermod/hermod/libs/retry"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// ErrNoLeader is returned by Leader when no candidate holds the election.
var ErrNoLeader = errors.New("no leader")

// ErrLeadershipLost is reported by Leadership.Err when the leadership ended
// without Close.
var ErrLeadershipLost = errors.New("leadership lost")

// Leadership is one term of leadership won by Campaign. The leader acts
// while Done is open and stops acting when it closes; to lead again after
// that, it Closes the Leadership and campaigns again. The methods are safe
// for concurrent use.
//
// A Leadership holds a lease (a concurrency.Session) bound to its key under
// ElectionPrefix(service). It ends, and Done closes, when:
//   - the session ends: its lease was revoked or expired;
//   - no keepalive of the lease was acknowledged for almost a TTL (etcd
//     unreachable, or the process starved): Done closes a tenth of the TTL
//     before the lease could expire on the server, so before another
//     candidate can be elected; from then on the lease is no longer kept
//     alive, so it expires even if etcd comes back;
//   - its key is deleted behind its back;
//   - the client is closed;
//   - Close or Resign is called.
//
// When the process dies, its lease is no longer kept alive and expires
// within the TTL; the next candidate is elected then.
type Leadership struct {
	cli      *clientv3.Client
	service  string
	id       string
	key      string
	rev      int64
	lease    clientv3.LeaseID
	ttl      time.Duration // granted
	opts     options
	log      *slog.Logger
	sess     *concurrency.Session
	stop     context.CancelFunc // ends the term's context: session, guard, observer
	wg       sync.WaitGroup
	observer *watchLoop

	done     chan struct{}
	doneOnce sync.Once
	mu       sync.Mutex
	err      error

	closeOnce sync.Once
	closeErr  error
}

// Campaign campaigns for the leadership of service as candidate id and blocks
// until it is elected, ctx ends (it returns ctx's error then) or the client
// is closed. Candidates are served in the order they started campaigning.
// The candidate's key is bound to a lease of the given TTL (at least one
// second; etcd rounds it up to whole seconds and to its minimum TTL): the
// TTL is how long a dead leader keeps the leadership, and how long etcd may
// be unreachable before the leader steps down.
//
// Failures while campaigning (etcd unreachable, the candidate's lease lost)
// are retried with backoff (WithRetryBackoff), each step bounded by the
// request timeout (WithRequestTimeout); when ctx ends, the candidacy is
// withdrawn (its lease revoked, within the request timeout). It uses the
// Session and Election of go.etcd.io/etcd/client/v3/concurrency, so other
// clients of that package on the same prefix take part in the same election.
func Campaign(ctx context.Context, cli *clientv3.Client, service, id string, ttl time.Duration, opts ...Option) (*Leadership, error) {
	if cli == nil {
		return nil, errors.New("campaign: nil etcd client")
	}
	if err := ValidateServiceName(service); err != nil {
		return nil, fmt.Errorf("campaign: %w", err)
	}
	prefix := ElectionPrefix(service)
	if id == "" {
		return nil, fmt.Errorf("campaign for %s: empty candidate id", prefix)
	}
	if ttl < time.Second {
		return nil, fmt.Errorf("campaign for %s: ttl %s is shorter than 1s", prefix, ttl)
	}
	o := newOptions(opts)
	c := &candidate{
		cli:     cli,
		service: service,
		id:      id,
		ttl:     leaseSeconds(ttl),
		opts:    o,
		log:     o.logger.With("service", service, "candidate", id),
	}
	bo := o.backoff()
	for {
		l, err := c.campaign(ctx)
		if err == nil {
			return l, nil
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("campaign for %s as %s: %w", prefix, id, ctx.Err())
		}
		if cli.Ctx().Err() != nil {
			return nil, fmt.Errorf("campaign for %s as %s: etcd client closed: %w", prefix, id, err)
		}
		delay := bo.NextBackOff()
		c.log.Warn("campaign failed; retrying", "error", err, "retry_in", delay)
		if !retry.Sleep(ctx, delay) {
			return nil, fmt.Errorf("campaign for %s as %s: %w", prefix, id, ctx.Err())
		}
	}
}

// candidate is one Campaign call.
type candidate struct {
	cli     *clientv3.Client
	service string
	id      string
	ttl     int64
	opts    options
	log     *slog.Logger
}

// campaign runs one campaign with a new lease. On failure it leaves nothing
// behind.
func (c *candidate) campaign(ctx context.Context) (*Leadership, error) {
	gctx, cancel := context.WithTimeout(ctx, c.opts.requestTimeout)
	grant, err := c.cli.Grant(gctx, c.ttl)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("grant lease: %w", err)
	}
	// The term's context: it ends the session's keepalives, and everything
	// else the term starts, when canceled.
	termCtx, stop := context.WithCancel(c.cli.Ctx())
	sess, err := concurrency.NewSession(clientView(termCtx, c.cli),
		concurrency.WithLease(grant.ID), concurrency.WithTTL(int(grant.TTL)), concurrency.WithContext(termCtx))
	if err != nil {
		stop()
		revokeLease(ctx, c.cli, grant.ID, c.opts.requestTimeout, c.log)
		return nil, fmt.Errorf("start session: %w", err)
	}
	abandon := func(err error) (*Leadership, error) {
		stop()
		<-sess.Done()
		revokeLease(ctx, c.cli, grant.ID, c.opts.requestTimeout, c.log)
		return nil, err
	}

	el := concurrency.NewElection(sess, strings.TrimSuffix(ElectionPrefix(c.service), "/"))
	cctx, ccancel := context.WithCancel(ctx)
	// A session lost while waiting ends the term and the wait: the library
	// would otherwise report a win once the older candidates are gone, with
	// a key that went with the lease. The term ends first, so that the
	// library's withdrawal does not wait for an unreachable etcd.
	stopOnLoss := context.AfterFunc(sess.Ctx(), func() {
		stop()
		ccancel()
	})
	// When ctx ends, the library withdraws the candidacy with the client's
	// context; ending the term's context makes that give up at once rather
	// than wait for an unreachable etcd (the lease revoke below cleans up).
	stopOnCancel := context.AfterFunc(ctx, stop)
	err = el.Campaign(cctx, c.id)
	lost, canceled := !stopOnLoss(), !stopOnCancel()
	ccancel()
	switch {
	case err != nil:
		return abandon(fmt.Errorf("wait for election: %w", err))
	case canceled:
		return abandon(ctx.Err())
	case lost:
		return abandon(errors.New("session ended while waiting for election"))
	}

	// Confirm: the lease is alive until at least sent+TTL, and the key is
	// still the one that won.
	sent := time.Now()
	vctx, vcancel := context.WithTimeout(ctx, c.opts.requestTimeout)
	defer vcancel()
	ka, err := c.cli.KeepAliveOnce(vctx, grant.ID)
	if err != nil {
		return abandon(fmt.Errorf("confirm lease: %w", err))
	}
	resp, err := c.cli.Get(vctx, el.Key())
	if err != nil {
		return abandon(fmt.Errorf("confirm key %s: %w", el.Key(), err))
	}
	if len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != el.Rev() {
		return abandon(fmt.Errorf("key %s lost while waiting for election", el.Key()))
	}

	ttl := time.Duration(ka.TTL) * time.Second
	l := &Leadership{
		cli:     c.cli,
		service: c.service,
		id:      c.id,
		key:     el.Key(),
		rev:     el.Rev(),
		lease:   grant.ID,
		ttl:     ttl,
		opts:    c.opts,
		log:     c.log,
		sess:    sess,
		stop:    stop,
		done:    make(chan struct{}),
	}
	l.wg.Add(1)
	go l.guard(termCtx, sent.Add(ttl-l.margin()))
	l.observer = startWatchLoop(termCtx, c.cli, l.key, false, leaderKeyTarget{l}, c.opts, c.log)
	c.log.Info("elected leader", "key", l.key, "revision", l.rev, "lease_id", int64(l.lease), "ttl_seconds", ka.TTL)
	return l, nil
}

// clientView returns a client that shares cli's connection (its KV, Lease
// and Watcher) and whose Ctx is ctx. The concurrency package runs clean-up
// requests with the client's Ctx (Election.Campaign resigns with it when its
// own context ends); with a view, canceling ctx ends them as well, instead
// of leaving them waiting for an unreachable etcd until the client is
// closed. A view must never be closed: that would close cli's lessor and
// watcher.
func clientView(ctx context.Context, cli *clientv3.Client) *clientv3.Client {
	v := clientv3.NewCtxClient(ctx, clientv3.WithZapLogger(cli.GetLogger()))
	v.KV, v.Lease, v.Watcher = cli.KV, cli.Lease, cli.Watcher
	return v
}

// margin is how long before the lease could expire the leader steps down
// when no keepalive is acknowledged.
func (l *Leadership) margin() time.Duration { return l.ttl / 10 }

// guard keeps a lower bound of the lease's expiry, from keepalives it sends
// itself every quarter TTL (a keepalive sent at t and acknowledged with TTL d
// keeps the lease until at least t+d), and ends the leadership before that
// bound passes; also when the session ends or the client is closed.
func (l *Leadership) guard(ctx context.Context, deadline time.Time) {
	defer l.wg.Done()
	expiry := time.NewTimer(time.Until(deadline))
	defer expiry.Stop()
	tick := time.NewTicker(l.ttl / 4)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			if l.cli.Ctx().Err() != nil {
				l.lose(errors.New("etcd client closed"))
			}
			return
		case <-l.sess.Done():
			l.lose(errors.New("session ended: its lease expired or was revoked"))
			return
		case <-expiry.C:
			l.lose(fmt.Errorf("no keepalive acknowledged for %s: the lease may expire", l.ttl-l.margin()))
			return
		case <-tick.C:
		}
		sent := time.Now()
		kctx, cancel := context.WithTimeout(ctx, min(time.Until(deadline), l.opts.requestTimeout))
		resp, err := l.cli.KeepAliveOnce(kctx, l.lease)
		cancel()
		switch {
		case err == nil:
			deadline = sent.Add(time.Duration(resp.TTL)*time.Second - l.margin())
			expiry.Reset(time.Until(deadline))
		case errors.Is(err, rpctypes.ErrLeaseNotFound):
			l.lose(errors.New("lease not found: it expired or was revoked"))
			return
		case ctx.Err() == nil:
			l.log.Debug("leader keepalive failed", "error", err, "steps_down_in", time.Until(deadline).Round(time.Millisecond))
		}
	}
}

// leaderKeyTarget ends the leadership when the leader key is deleted or
// replaced.
type leaderKeyTarget struct{ l *Leadership }

func (t leaderKeyTarget) reset(resp *clientv3.GetResponse) bool {
	if len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != t.l.rev {
		t.l.lose(fmt.Errorf("leader key %s is gone", t.l.key))
	}
	return false
}

func (t leaderKeyTarget) apply(resp clientv3.WatchResponse) bool {
	for _, ev := range resp.Events {
		if ev.Type == mvccpb.DELETE || ev.Kv.CreateRevision != t.l.rev {
			t.l.lose(fmt.Errorf("leader key %s deleted at revision %d", t.l.key, ev.Kv.ModRevision))
		}
	}
	return false
}

func (leaderKeyTarget) deliver() {}

// lose ends the leadership for cause, unless it has ended already.
func (l *Leadership) lose(cause error) {
	l.mu.Lock()
	first := l.err == nil
	if first {
		l.err = fmt.Errorf("leadership of %s as %s: %w: %w", l.key, l.id, ErrLeadershipLost, cause)
	}
	l.mu.Unlock()
	if !first {
		return
	}
	l.log.Warn("leadership lost", "key", l.key, "error", cause)
	// Stop keeping the lease alive: it expires even if etcd comes back, so
	// that another candidate can take over.
	l.stop()
	l.doneOnce.Do(func() { close(l.done) })
}

// Done is closed when the leadership has ended: lost, or closed.
func (l *Leadership) Done() <-chan struct{} { return l.done }

// Err returns nil while the leadership holds; after Done closed, an error
// wrapping ErrLeadershipLost and its cause, or ErrClosed after Close.
func (l *Leadership) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// Service returns the service whose leadership this is.
func (l *Leadership) Service() string { return l.service }

// ID returns the leader's candidate id.
func (l *Leadership) ID() string { return l.id }

// Key returns the leader's key under ElectionPrefix(service).
func (l *Leadership) Key() string { return l.key }

// Revision returns the leader key's create revision. It grows with every
// term, so it serves as a fencing token: a write tagged with an older one
// comes from a former leader.
func (l *Leadership) Revision() int64 { return l.rev }

// LeaseID returns the leadership's lease.
func (l *Leadership) LeaseID() clientv3.LeaseID { return l.lease }

// Resign gives the leadership up at once; it is Close (a Leadership is one
// term: campaign again to lead again).
func (l *Leadership) Resign(ctx context.Context) error { return l.Close(ctx) }

// Close ends the leadership: it stops the goroutines the Leadership started
// and waits for them, closes Done, and revokes the lease (within the request
// timeout) so that the leader key goes at once and the next candidate is
// elected. If the revoke fails (etcd is unreachable, or the client was
// closed) the next candidate is elected when the lease expires. Calls after
// the first return the first one's result.
func (l *Leadership) Close(ctx context.Context) error {
	l.closeOnce.Do(func() {
		l.mu.Lock()
		if l.err == nil {
			l.err = fmt.Errorf("leadership of %s as %s: %w", l.key, l.id, ErrClosed)
		}
		l.mu.Unlock()
		l.stop()
		l.wg.Wait()
		l.observer.close()
		<-l.sess.Done()
		l.doneOnce.Do(func() { close(l.done) })
		if err := l.cli.Ctx().Err(); err != nil {
			l.closeErr = fmt.Errorf("resign %s: etcd client closed, the lease expires after its TTL: %w", l.key, err)
			return
		}
		rctx, cancel := context.WithTimeout(ctx, l.opts.requestTimeout)
		defer cancel()
		if _, err := l.cli.Revoke(rctx, l.lease); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
			l.closeErr = fmt.Errorf("resign %s: revoke lease: %w", l.key, err)
			return
		}
		l.log.Info("leadership released", "key", l.key, "lease_id", int64(l.lease))
	})
	return l.closeErr
}

// Leader returns the id of service's current leader: the candidate that
// campaigned first among those whose lease is alive. It fails with
// ErrNoLeader when there is none.
func Leader(ctx context.Context, cli *clientv3.Client, service string) (string, error) {
	if cli == nil {
		return "", errors.New("read leader: nil etcd client")
	}
	if err := ValidateServiceName(service); err != nil {
		return "", fmt.Errorf("read leader: %w", err)
	}
	prefix := ElectionPrefix(service)
	resp, err := cli.Get(ctx, prefix, clientv3.WithFirstCreate()...)
	if err != nil {
		return "", fmt.Errorf("read leader of %s: %w", prefix, err)
	}
	if len(resp.Kvs) == 0 {
		return "", fmt.Errorf("read leader of %s: %w", prefix, ErrNoLeader)
	}
	return string(resp.Kvs[0].Value), nil
}
