package coord

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// ErrCompacted is the condition of a history read that reaches a revision
// etcd has compacted away.
var ErrCompacted = errors.New("history compacted")

// ConfigBefore returns the version of a pool's config that the write at
// revision rev replaced: the config key as it was at revision rev-1, read
// from etcd's history (etcd keeps it until a compaction). Walking back from
// the current version's Revision, each call returns the previous version.
// It fails with ErrNoConfig when the pool had no config then (it was
// created at rev, or had been deleted), and with ErrCompacted when etcd no
// longer holds that revision.
func ConfigBefore(ctx context.Context, cli *clientv3.Client, pool string, rev int64) (ConfigVersion, error) {
	if err := checkConfigArgs(cli, pool); err != nil {
		return ConfigVersion{}, fmt.Errorf("get config before revision %d: %w", rev, err)
	}
	key := ConfigKey(pool)
	if rev <= 1 {
		return ConfigVersion{}, fmt.Errorf("get config %s before revision %d: %w", key, rev, ErrNoConfig)
	}
	resp, err := cli.Get(ctx, key, clientv3.WithRev(rev-1))
	if errors.Is(err, rpctypes.ErrCompacted) {
		return ConfigVersion{}, fmt.Errorf("get config %s at revision %d: %w (%w)", key, rev-1, ErrCompacted, err)
	}
	if err != nil {
		return ConfigVersion{}, fmt.Errorf("get config %s at revision %d: %w", key, rev-1, err)
	}
	if len(resp.Kvs) == 0 {
		return ConfigVersion{}, fmt.Errorf("get config %s before revision %d: %w", key, rev, ErrNoConfig)
	}
	return configVersionOf(pool, resp.Kvs[0]), nil
}
