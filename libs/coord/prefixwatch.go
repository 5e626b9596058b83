package coord

import (
	"context"
	"errors"
	"maps"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// PrefixWatcher keeps a copy of every key under a prefix, delivering the
// whole set after the first list and after every batch of changes.
type PrefixWatcher struct{ loop *watchLoop }

// WatchPrefix calls fn with every key under prefix and its value (and the
// revision they are at) after the first list and whenever they change.
// fn runs on the watcher's goroutine and must not keep the map.
func WatchPrefix(ctx context.Context, cli *clientv3.Client, prefix string, fn func(kvs map[string][]byte, rev int64), opts ...Option) (*PrefixWatcher, error) {
	if cli == nil {
		return nil, errors.New("watch prefix: nil etcd client")
	}
	if prefix == "" {
		return nil, errors.New("watch prefix: empty prefix")
	}
	o := newOptions(opts)
	t := &prefixTarget{kvs: map[string][]byte{}, fn: fn}
	return &PrefixWatcher{loop: startWatchLoop(ctx, cli, prefix, true, t, o, o.logger.With("watch", "prefix"))}, nil
}

// Close stops the watcher and waits for a running fn to return.
func (w *PrefixWatcher) Close() { w.loop.close() }

// Done is closed when the watcher has stopped.
func (w *PrefixWatcher) Done() <-chan struct{} { return w.loop.done }

type prefixTarget struct {
	kvs map[string][]byte
	rev int64
	fn  func(map[string][]byte, int64)
}

func (t *prefixTarget) reset(resp *clientv3.GetResponse) bool {
	clear(t.kvs)
	for _, kv := range resp.Kvs {
		t.kvs[string(kv.Key)] = kv.Value
	}
	t.rev = resp.Header.GetRevision()
	return true
}

func (t *prefixTarget) apply(resp clientv3.WatchResponse) bool {
	for _, ev := range resp.Events {
		if ev.Type == mvccpb.DELETE {
			delete(t.kvs, string(ev.Kv.Key))
		} else {
			t.kvs[string(ev.Kv.Key)] = ev.Kv.Value
		}
	}
	t.rev = resp.Header.GetRevision()
	return len(resp.Events) > 0
}

func (t *prefixTarget) deliver() { t.fn(maps.Clone(t.kvs), t.rev) }
