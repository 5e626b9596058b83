package coord

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	registryv1 "github.com/hermod/hermod/libs/api/hermod/registry/v1"
)

// Snapshot is the state of a pool's endpoints at one etcd revision.
// Snapshots are immutable: the Endpoint messages are shared between
// snapshots and must not be modified.
type Snapshot struct {
	// Pool is the pool's name.
	Pool string
	// Revision is the etcd revision the snapshot reflects: every change of the
	// pool's endpoints up to it is included.
	Revision int64
	// Endpoints holds the valid endpoints by name.
	Endpoints map[string]*registryv1.Endpoint
	// Malformed holds the keys under the pool's prefix that were skipped,
	// sorted by key. Each is a KeyError.
	Malformed []KeyError
}

// Sorted returns the endpoints sorted by name.
func (s Snapshot) Sorted() []*registryv1.Endpoint {
	eps := slices.Collect(maps.Values(s.Endpoints))
	slices.SortFunc(eps, func(a, b *registryv1.Endpoint) int { return strings.Compare(a.GetName(), b.GetName()) })
	return eps
}

// LoadSnapshot reads a pool's endpoints with one consistent Get. Malformed
// values are skipped, listed in the snapshot and logged as warnings.
func LoadSnapshot(ctx context.Context, cli *clientv3.Client, pool string, opts ...Option) (Snapshot, error) {
	if cli == nil {
		return Snapshot{}, errors.New("list endpoints: nil etcd client")
	}
	if err := ValidatePoolName(pool); err != nil {
		return Snapshot{}, fmt.Errorf("list endpoints: %w", err)
	}
	o := newOptions(opts)
	st, err := load(ctx, cli, pool, o.logger.With("pool", pool))
	if err != nil {
		return Snapshot{}, err
	}
	return st.snapshot(), nil
}

// ListEndpoints returns a pool's valid endpoints sorted by name and the etcd
// revision they were read at; a Watch from the revision after it sees every
// later change. Malformed values are skipped and logged as warnings (use
// LoadSnapshot to get them).
func ListEndpoints(ctx context.Context, cli *clientv3.Client, pool string, opts ...Option) ([]*registryv1.Endpoint, int64, error) {
	snap, err := LoadSnapshot(ctx, cli, pool, opts...)
	if err != nil {
		return nil, 0, err
	}
	return snap.Sorted(), snap.Revision, nil
}

// Watcher delivers snapshots of a pool's endpoints on every change. See
// WatchEndpoints.
type Watcher struct {
	loop *watchLoop
}

// WatchEndpoints watches a pool's endpoints and calls fn with a full
// snapshot first once listed, then after every change. Changes that arrive
// while fn runs are coalesced into the next snapshot. fn runs on the
// Watcher's goroutine, one call at a time, and must not call Close.
//
// The Watcher lists the endpoints with a Get, then watches from the revision
// after it; when the watch is compacted or canceled it lists again (the
// snapshot after a relist replaces the state as a whole). A failed list is
// retried with backoff. The Watcher stops when ctx ends, Close is called or
// the client is closed.
func WatchEndpoints(ctx context.Context, cli *clientv3.Client, pool string, fn func(Snapshot), opts ...Option) (*Watcher, error) {
	if err := checkWatch("watch endpoints", cli, fn == nil, ValidatePoolName(pool)); err != nil {
		return nil, err
	}
	o := newOptions(opts)
	log := o.logger.With("pool", pool)
	target := &endpointsTarget{st: newPoolState(pool, log), fn: fn}
	return &Watcher{loop: startWatchLoop(ctx, cli, EndpointsPrefix(pool), true, target, o, log)}, nil
}

// Close stops the Watcher and waits for its goroutine (and so for a running
// fn) to return.
func (w *Watcher) Close() { w.loop.close() }

// Done is closed when the Watcher has stopped.
func (w *Watcher) Done() <-chan struct{} { return w.loop.done }

// endpointsTarget is the Watcher's watchTarget: every list and every change
// is delivered as a snapshot.
type endpointsTarget struct {
	st *poolState
	fn func(Snapshot)
}

func (t *endpointsTarget) reset(resp *clientv3.GetResponse) bool {
	t.st.reset(resp)
	return true
}

func (t *endpointsTarget) apply(resp clientv3.WatchResponse) bool { return t.st.apply(resp) }

func (t *endpointsTarget) deliver() { t.fn(t.st.snapshot()) }

// poolState is a view of a pool's endpoints; only one goroutine uses it.
type poolState struct {
	pool      string
	rev       int64
	endpoints map[string]*registryv1.Endpoint
	malformed map[string]KeyError
	log       *slog.Logger
}

func newPoolState(pool string, log *slog.Logger) *poolState {
	return &poolState{pool: pool, log: log}
}

// load reads a pool's endpoints with one Get.
func load(ctx context.Context, cli *clientv3.Client, pool string, log *slog.Logger) (*poolState, error) {
	resp, err := cli.Get(ctx, EndpointsPrefix(pool), clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("list endpoints of pool %s: %w", pool, err)
	}
	st := newPoolState(pool, log)
	st.reset(resp)
	return st, nil
}

// reset replaces the state with the result of a Get of the pool's prefix.
func (st *poolState) reset(resp *clientv3.GetResponse) {
	st.rev = resp.Header.GetRevision()
	st.endpoints = make(map[string]*registryv1.Endpoint, len(resp.Kvs))
	st.malformed = make(map[string]KeyError)
	for _, kv := range resp.Kvs {
		st.put(string(kv.Key), kv.Value)
	}
}

// apply applies a watch response and says whether the endpoints changed.
func (st *poolState) apply(resp clientv3.WatchResponse) bool {
	for _, ev := range resp.Events {
		key := string(ev.Kv.Key)
		switch ev.Type {
		case mvccpb.PUT:
			st.put(key, ev.Kv.Value)
		case mvccpb.DELETE:
			st.remove(key)
		}
		st.rev = max(st.rev, ev.Kv.ModRevision)
	}
	if resp.IsProgressNotify() {
		st.rev = max(st.rev, resp.Header.GetRevision())
	}
	return len(resp.Events) > 0
}

func (st *poolState) put(key string, value []byte) {
	ep, err := DecodeEndpoint(key, value)
	if err != nil {
		var ke KeyError
		if !errors.As(err, &ke) {
			ke = KeyError{Key: key, Err: err}
		}
		st.log.Warn("skipping malformed endpoint entry", "key", key, "error", ke.Err)
		st.remove(key)
		st.malformed[key] = ke
		return
	}
	delete(st.malformed, key)
	st.endpoints[ep.GetName()] = ep
}

func (st *poolState) remove(key string) {
	delete(st.malformed, key)
	if name, ok := strings.CutPrefix(key, EndpointsPrefix(st.pool)); ok {
		delete(st.endpoints, name)
	}
}

// snapshot returns a copy of the state.
func (st *poolState) snapshot() Snapshot {
	s := Snapshot{
		Pool:      st.pool,
		Revision:  st.rev,
		Endpoints: maps.Clone(st.endpoints),
	}
	if len(st.malformed) > 0 {
		s.Malformed = slices.SortedFunc(maps.Values(st.malformed), func(a, b KeyError) int { return cmp.Compare(a.Key, b.Key) })
	}
	return s
}

// checkWatch checks what a watch needs, for the call op: a client, a
// callback (noCallback: fn is nil) and a valid name (nameErr: what its
// validation said).
func checkWatch(op string, cli *clientv3.Client, noCallback bool, nameErr error) error {
	switch {
	case cli == nil:
		return fmt.Errorf("%s: nil etcd client", op)
	case noCallback:
		return fmt.Errorf("%s: nil callback", op)
	case nameErr != nil:
		return fmt.Errorf("%s: %w", op, nameErr)
	}
	return nil
}
