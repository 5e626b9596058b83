package coord

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// ErrNoConfig is the condition of a pool that has no config key.
var ErrNoConfig = errors.New("no config")

// ErrConflict is returned by a conditional write (IfRevision) whose
// condition no longer holds: the config changed since it was read.
var ErrConflict = errors.New("config changed concurrently")

// ConfigVersion is one version of a pool's config: the raw bytes of its
// EndpointPickerConfig YAML, which coord stores without looking into them
// (the caller validates the content).
type ConfigVersion struct {
	// Pool is the pool's name.
	Pool string
	// Data is the config as stored. It belongs to the receiver.
	Data []byte
	// Revision is the key's ModRevision, the etcd revision of the write
	// that produced this version; 0 when Deleted. PutConfig's
	// IfRevision(v.Revision) writes only if the config is still v.
	Revision int64
	// Version counts the writes of the key since it was created; 0 when
	// Deleted.
	Version int64
	// Deleted says that the pool has no config: it was deleted, or never
	// written. Data is nil then.
	Deleted bool
}

// sameVersion says whether two versions are the same write.
func sameVersion(a, b ConfigVersion) bool {
	return a.Deleted == b.Deleted && a.Revision == b.Revision
}

func configVersionOf(pool string, kv *mvccpb.KeyValue) ConfigVersion {
	return ConfigVersion{Pool: pool, Data: kv.Value, Revision: kv.ModRevision, Version: kv.Version}
}

// PutOption configures PutConfig and DeleteConfig.
type PutOption func(*putOptions)

type putOptions struct {
	ifRevision *int64
}

// IfRevision makes a write conditional: it happens only if the config key's
// ModRevision is still rev (ConfigVersion.Revision of the version read); rev
// 0 means only if the pool has no config. Otherwise the write fails with
// ErrConflict.
func IfRevision(rev int64) PutOption {
	return func(o *putOptions) { o.ifRevision = &rev }
}

// GetConfig reads a pool's config. It fails with ErrNoConfig when the pool
// has none.
func GetConfig(ctx context.Context, cli *clientv3.Client, pool string) (ConfigVersion, error) {
	if err := checkConfigArgs(cli, pool); err != nil {
		return ConfigVersion{}, fmt.Errorf("get config: %w", err)
	}
	key := ConfigKey(pool)
	resp, err := cli.Get(ctx, key)
	if err != nil {
		return ConfigVersion{}, fmt.Errorf("get config %s: %w", key, err)
	}
	if len(resp.Kvs) == 0 {
		return ConfigVersion{}, fmt.Errorf("get config %s: %w", key, ErrNoConfig)
	}
	return configVersionOf(pool, resp.Kvs[0]), nil
}

// PutConfig writes a pool's config and returns the version written. With
// IfRevision, the write is a compare-and-swap: when the config is no longer
// at that revision, nothing is written and PutConfig returns the current
// version (Deleted when there is none) with an error wrapping ErrConflict
// that names the current revision.
func PutConfig(ctx context.Context, cli *clientv3.Client, pool string, data []byte, opts ...PutOption) (ConfigVersion, error) {
	if err := checkConfigArgs(cli, pool); err != nil {
		return ConfigVersion{}, fmt.Errorf("put config: %w", err)
	}
	var o putOptions
	for _, opt := range opts {
		opt(&o)
	}
	key := ConfigKey(pool)
	put := clientv3.OpPut(key, string(data), clientv3.WithPrevKV())
	if o.ifRevision == nil {
		resp, err := cli.Do(ctx, put)
		if err != nil {
			return ConfigVersion{}, fmt.Errorf("put config %s: %w", key, err)
		}
		put := resp.Put()
		return writtenVersion(pool, data, put.Header.GetRevision(), put.PrevKv), nil
	}
	resp, err := cli.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", *o.ifRevision)).
		Then(put).
		Else(clientv3.OpGet(key)).
		Commit()
	if err != nil {
		return ConfigVersion{}, fmt.Errorf("put config %s: %w", key, err)
	}
	if !resp.Succeeded {
		cur := currentVersion(pool, resp)
		return cur, fmt.Errorf("put config %s if at revision %d: it is at revision %d: %w", key, *o.ifRevision, cur.Revision, ErrConflict)
	}
	// The transaction's revision is the put's.
	return writtenVersion(pool, data, resp.Header.GetRevision(), resp.Responses[0].GetResponsePut().GetPrevKv()), nil
}

// writtenVersion is the version a put at revision rev produced; prev is the
// key-value it replaced, if any.
func writtenVersion(pool string, data []byte, rev int64, prev *mvccpb.KeyValue) ConfigVersion {
	v := ConfigVersion{Pool: pool, Data: bytes.Clone(data), Revision: rev, Version: 1}
	if prev != nil {
		v.Version = prev.Version + 1
	}
	return v
}

// currentVersion is the version the Else branch of a failed conditional
// write read.
func currentVersion(pool string, resp *clientv3.TxnResponse) ConfigVersion {
	if len(resp.Responses) > 0 {
		if kvs := resp.Responses[0].GetResponseRange().GetKvs(); len(kvs) > 0 {
			return configVersionOf(pool, kvs[0])
		}
	}
	return ConfigVersion{Pool: pool, Deleted: true}
}

// DeleteConfig deletes a pool's config. It fails with ErrNoConfig when the
// pool has none, and with ErrConflict when IfRevision was given and the
// config is no longer at that revision.
func DeleteConfig(ctx context.Context, cli *clientv3.Client, pool string, opts ...PutOption) error {
	if err := checkConfigArgs(cli, pool); err != nil {
		return fmt.Errorf("delete config: %w", err)
	}
	var o putOptions
	for _, opt := range opts {
		opt(&o)
	}
	key := ConfigKey(pool)
	if o.ifRevision == nil {
		resp, err := cli.Delete(ctx, key)
		if err != nil {
			return fmt.Errorf("delete config %s: %w", key, err)
		}
		if resp.Deleted == 0 {
			return fmt.Errorf("delete config %s: %w", key, ErrNoConfig)
		}
		return nil
	}
	resp, err := cli.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", *o.ifRevision)).
		Then(clientv3.OpDelete(key)).
		Else(clientv3.OpGet(key)).
		Commit()
	if err != nil {
		return fmt.Errorf("delete config %s: %w", key, err)
	}
	if !resp.Succeeded {
		cur := currentVersion(pool, resp)
		return fmt.Errorf("delete config %s if at revision %d: it is at revision %d: %w", key, *o.ifRevision, cur.Revision, ErrConflict)
	}
	if resp.Responses[0].GetResponseDeleteRange().GetDeleted() == 0 {
		// IfRevision(0) on an absent key.
		return fmt.Errorf("delete config %s: %w", key, ErrNoConfig)
	}
	return nil
}

func checkConfigArgs(cli *clientv3.Client, pool string) error {
	if cli == nil {
		return errors.New("nil etcd client")
	}
	return ValidatePoolName(pool)
}

// ConfigWatcher delivers the versions of a pool's config. See WatchConfig.
type ConfigWatcher struct {
	loop *watchLoop
}

// WatchConfig watches a pool's config and calls fn with the current version
// first (a Deleted version when the pool has none), then with every new
// version (a Deleted one when the key is deleted). Versions that arrive while
// fn runs are coalesced: fn gets the newest. fn never gets the same version
// twice in a row, and the versions it gets are in the order etcd applied
// them. fn runs on the ConfigWatcher's goroutine, one call at a time, and
// must not call Close. coord does not look into the bytes: fn validates
// them, and keeps its last good config when they are not.
//
// The ConfigWatcher gets the key, then watches it from the revision after
// that; when the watch is compacted, canceled or broken it gets the key
// again and delivers the version it finds if it differs from the last one
// delivered. Failures are retried with backoff. While etcd cannot be
// reached, fn is not called: the reader keeps the last version it was given
// (the config it runs with stays in force) until etcd answers again. The
// ConfigWatcher stops when ctx ends, Close is called or the client is
// closed.
func WatchConfig(ctx context.Context, cli *clientv3.Client, pool string, fn func(ConfigVersion), opts ...Option) (*ConfigWatcher, error) {
	if err := checkConfigArgs(cli, pool); err != nil {
		return nil, fmt.Errorf("watch config: %w", err)
	}
	if fn == nil {
		return nil, errors.New("watch config: nil callback")
	}
	o := newOptions(opts)
	target := &configTarget{pool: pool, fn: fn}
	return &ConfigWatcher{loop: startWatchLoop(ctx, cli, ConfigKey(pool), false, target, o, o.logger.With("pool", pool))}, nil
}

// Close stops the ConfigWatcher and waits for its goroutine (and so for a
// running fn) to return.
func (w *ConfigWatcher) Close() { w.loop.close() }

// Done is closed when the ConfigWatcher has stopped.
func (w *ConfigWatcher) Done() <-chan struct{} { return w.loop.done }

// configTarget is the ConfigWatcher's watchTarget.
type configTarget struct {
	pool      string
	fn        func(ConfigVersion)
	cur       ConfigVersion
	last      ConfigVersion
	delivered bool
}

func (t *configTarget) reset(resp *clientv3.GetResponse) bool {
	if len(resp.Kvs) == 0 {
		t.cur = ConfigVersion{Pool: t.pool, Deleted: true}
	} else {
		t.cur = configVersionOf(t.pool, resp.Kvs[0])
	}
	return t.pending()
}

func (t *configTarget) apply(resp clientv3.WatchResponse) bool {
	for _, ev := range resp.Events {
		switch ev.Type {
		case mvccpb.PUT:
			t.cur = configVersionOf(t.pool, ev.Kv)
		case mvccpb.DELETE:
			t.cur = ConfigVersion{Pool: t.pool, Deleted: true}
		}
	}
	return t.pending()
}

// pending says whether the current version differs from the last delivered.
func (t *configTarget) pending() bool {
	return !t.delivered || !sameVersion(t.cur, t.last)
}

func (t *configTarget) deliver() {
	t.last, t.delivered = t.cur, true
	t.fn(t.cur)
}
