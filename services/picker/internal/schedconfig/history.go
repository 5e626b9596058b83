package schedconfig

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/hermod/hermod/libs/coord"
)

// History returns the version of the config that the write at revision
// rev replaced (see coord.ConfigBefore); an error ends a walk back.
type History func(ctx context.Context, rev int64) (Version, error)

// MaxHistoryWalk bounds how many older versions ApplyLatest tries.
const MaxHistoryWalk = 32

// historyTimeout bounds one read of the config's history.
const historyTimeout = 5 * time.Second

// EtcdHistory reads a pool's config history from etcd.
func EtcdHistory(cli *clientv3.Client, pool string) History {
	return func(ctx context.Context, rev int64) (Version, error) {
		ctx, cancel := context.WithTimeout(ctx, historyTimeout)
		defer cancel()
		v, err := coord.ConfigBefore(ctx, cli, pool, rev)
		if err != nil {
			return Version{}, fmt.Errorf("config history of pool %s: %w", pool, err)
		}
		return Version{Source: SourceEtcd, Revision: v.Revision, Data: v.Data}, nil
	}
}

// ApplyLatest applies v, the newest version of the etcd config, as Apply
// does. When v is invalid it walks back through the versions before it
// (older) and puts the newest valid one in force, unless the version in
// force is at least as new: so a picker that starts, or missed versions,
// while the newest version is invalid serves the last valid version, as
// its peers do, and not the built-in default. It returns Apply's error for
// v.
func (l *Loader) ApplyLatest(ctx context.Context, v Version, older History) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	err := l.apply(v, true)
	switch {
	case err == nil:
		l.metrics.newestInvalid.Set(0)
		return nil
	case errors.Is(err, ErrUnchanged):
		return err
	}
	l.metrics.newestInvalid.Set(1)
	l.metrics.newestRevision.Set(float64(v.Revision))
	in := l.cur.Load().version
	found, walkErr := l.walkBack(ctx, v, in, older)
	cur := l.cur.Load().version
	switch {
	case found:
		l.log.Error("the newest endpoint picker config is invalid: serving the last valid one from the history",
			"pool", l.pool, "invalid_revision", v.Revision, "in_force_revision", cur.Revision, "error", err)
	case cur.Source == SourceEtcd:
		l.log.Error("the newest endpoint picker config is invalid: keeping the one in force",
			"pool", l.pool, "invalid_revision", v.Revision, "in_force_revision", cur.Revision, "error", err)
	default:
		l.log.Error("the newest endpoint picker config is invalid and no valid version was found in the history: serving the "+cur.Source+" config",
			"pool", l.pool, "invalid_revision", v.Revision, "in_force_source", cur.Source, "history_error", walkErr, "error", err)
	}
	return err
}

// walkBack tries the versions before from, newest first, until one builds
// (found) or the walk reaches the version in force (in), the key's
// creation, a history error or MaxHistoryWalk versions. l.mu is held.
func (l *Loader) walkBack(ctx context.Context, from, in Version, older History) (found bool, err error) {
	at := from
	for range MaxHistoryWalk {
		prev, err := older(ctx, at.Revision)
		if err != nil {
			return false, err
		}
		if in.Source == SourceEtcd && prev.Revision <= in.Revision {
			return false, nil // the version in force is the newest valid one
		}
		switch aerr := l.apply(prev, false); {
		case aerr == nil, errors.Is(aerr, ErrUnchanged):
			return aerr == nil, nil
		default:
			l.log.Warn("an older endpoint picker config is invalid too", "pool", l.pool, "revision", prev.Revision, "error", aerr)
		}
		at = prev
	}
	return false, fmt.Errorf("no valid version among the %d before revision %d", MaxHistoryWalk, from.Revision)
}
