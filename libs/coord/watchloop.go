package coord

import (
	"context"
	"log/slog"

	"github.com/hermod/hermod/libs/retry"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// watchTarget is the state a watchLoop keeps up to date. Only the loop's
// goroutine calls its methods.
type watchTarget interface {
	// reset replaces the state with the result of a list and says whether
	// to deliver it.
	reset(resp *clientv3.GetResponse) bool
	// apply applies a watch response and says whether to deliver.
	apply(resp clientv3.WatchResponse) bool
	// deliver hands the state to its consumer.
	deliver()
}

// watchLoop keeps a watchTarget up to date with a key or a key prefix. It
// lists with a Get, then watches from the revision after it; when the watch
// is compacted, canceled or closed it lists again (a list replaces the state
// as a whole). A failed list is retried with backoff, and so is a watch that
// failed before it delivered anything. Responses already waiting when one
// arrives are applied together (coalesced) before deliver runs. The loop
// stops when its context ends, close is called or the client is closed. It
// is the mechanism under Watcher, ConfigWatcher, MembersWatcher and the
// leader key check of Leadership.
type watchLoop struct {
	cli    *clientv3.Client
	key    string
	prefix bool
	target watchTarget
	opts   options
	log    *slog.Logger
	cancel context.CancelFunc
	done   chan struct{}
}

// startWatchLoop starts a watchLoop's goroutine.
func startWatchLoop(ctx context.Context, cli *clientv3.Client, key string, prefix bool, target watchTarget, o options, log *slog.Logger) *watchLoop {
	ctx, cancel := context.WithCancel(ctx)
	w := &watchLoop{
		cli:    cli,
		key:    key,
		prefix: prefix,
		target: target,
		opts:   o,
		log:    log.With("watch_key", key),
		cancel: cancel,
		done:   make(chan struct{}),
	}
	go w.run(ctx)
	return w
}

// close stops the loop and waits for its goroutine (and so for a running
// deliver) to return.
func (w *watchLoop) close() {
	w.cancel()
	<-w.done
}

func (w *watchLoop) run(ctx context.Context) {
	defer close(w.done)
	defer w.cancel()
	bo := w.opts.backoff()
	for {
		rev, ok := w.list(ctx)
		if !ok {
			return
		}
		if w.opts.afterList != nil {
			w.opts.afterList()
		}
		delivered, ok := w.watch(ctx, rev)
		if !ok {
			return
		}
		// A watch that failed before it delivered anything may fail again
		// at once: relist with backoff then.
		if delivered {
			bo.Reset()
			continue
		}
		if !retry.Sleep(ctx, bo.NextBackOff()) {
			return
		}
	}
}

// list gets the key or prefix, retrying with backoff, resets the target and
// delivers when it asks to. It returns the revision listed, or false when the
// loop must stop.
func (w *watchLoop) list(ctx context.Context) (int64, bool) {
	var opts []clientv3.OpOption
	if w.prefix {
		opts = append(opts, clientv3.WithPrefix())
	}
	bo := w.opts.backoff()
	for {
		lctx, cancel := context.WithTimeout(ctx, w.opts.requestTimeout)
		resp, err := w.cli.Get(lctx, w.key, opts...)
		cancel()
		if err == nil {
			if w.target.reset(resp) {
				w.target.deliver()
			}
			return resp.Header.GetRevision(), true
		}
		if w.stopped(ctx) {
			return 0, false
		}
		delay := bo.NextBackOff()
		w.log.Warn("watch list failed; retrying", "error", err, "retry_in", delay)
		if !retry.Sleep(ctx, delay) {
			return 0, false
		}
	}
}

// watch applies the watch responses after rev to the target and delivers,
// until the watch must be relisted (ok true) or the loop must stop (ok
// false). delivered says whether any response was applied.
func (w *watchLoop) watch(ctx context.Context, rev int64) (delivered, ok bool) {
	// WithRequireLeader cancels the watch when the member loses its leader,
	// instead of leaving it silently stale.
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	opts := []clientv3.OpOption{clientv3.WithRev(rev + 1)}
	if w.prefix {
		opts = append(opts, clientv3.WithPrefix())
	}
	wch := w.cli.Watch(wctx, w.key, opts...)
	for {
		var resp clientv3.WatchResponse
		select {
		case <-ctx.Done():
			return delivered, false
		case resp, ok = <-wch:
		}
		changed := false
		for more := true; more; {
			if !ok || resp.Canceled || resp.Err() != nil {
				if w.stopped(ctx) {
					return delivered, false
				}
				if !ok {
					w.log.Warn("watch closed; listing again")
				} else {
					w.log.Warn("watch ended; listing again", "error", resp.Err(), "compact_revision", resp.CompactRevision)
				}
				return delivered, true
			}
			delivered = true
			if w.target.apply(resp) {
				changed = true
			}
			// Coalesce what is already waiting.
			select {
			case resp, ok = <-wch:
			default:
				more = false
			}
		}
		if changed {
			w.target.deliver()
		}
	}
}

// stopped says whether the loop must stop: its context ended or the client
// was closed.
func (w *watchLoop) stopped(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	if w.cli.Ctx().Err() != nil {
		w.log.Warn("etcd client closed; watch stops")
		return true
	}
	return false
}
