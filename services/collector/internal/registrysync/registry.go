package registrysync

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	registryv1 "github.com/hermod/hermod/libs/api/hermod/registry/v1"
	"github.com/hermod/hermod/libs/coord"
)

// errFenced is the condition of a write refused because the writer's
// election key is gone: it is no longer the leader.
var errFenced = errors.New("no longer the registry writer's leader")

// maxAttempts bounds the attempts of one put or delete whose expected mod
// revision turned out stale.
const maxAttempts = 3

// ownedEntry is an entry of the writer's in the registry, as last written
// or read.
type ownedEntry struct {
	ep    *registryv1.Endpoint
	rev   int64 // mod revision
	lease clientv3.LeaseID
}

// registry writes one leader term's entries: it knows the entries it owns
// (with their mod revisions) and the names held by entries it does not own,
// and makes the owned ones equal to a desired state with transactions
// conditioned on the leader's election key (fencing) and on each entry's
// mod revision. Only the leader's goroutine uses it.
type registry struct {
	cli   *clientv3.Client
	pool  string
	owner string           // the value of LabelDiscoveredBy on the entries it owns
	lease clientv3.LeaseID // the term's lease, every entry is written with
	// The leader's election key and its create revision: every write is
	// conditioned on the key still being the one the leader won with.
	leaderKey string
	leaderRev int64
	timeout   time.Duration
	log       *slog.Logger

	owned   map[string]ownedEntry
	foreign map[string]int64 // names of entries that are not the writer's, and their mod revisions
	// warned are the names of desired entries that someone else holds,
	// logged once per term.
	warned map[string]bool
}

func newRegistry(cli *clientv3.Client, pool, owner string, l *coord.Leadership, lease clientv3.LeaseID, timeout time.Duration, log *slog.Logger) *registry {
	return &registry{
		cli: cli, pool: pool, owner: owner, lease: lease, timeout: timeout, log: log,
		leaderKey: l.Key(), leaderRev: l.Revision(),
		owned:   map[string]ownedEntry{},
		foreign: map[string]int64{},
		warned:  map[string]bool{},
	}
}

// load lists the pool's entries and replaces what the registry knows with
// them.
func (r *registry) load(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	prefix := coord.EndpointsPrefix(r.pool)
	resp, err := r.cli.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return fmt.Errorf("list %s: %w", prefix, err)
	}
	clear(r.owned)
	clear(r.foreign)
	for _, kv := range resp.Kvs {
		r.note(kv)
	}
	return nil
}

// note records an entry read from etcd as owned or foreign and returns its
// name.
func (r *registry) note(kv *mvccpb.KeyValue) string {
	key := string(kv.Key)
	_, name, err := coord.ParseEndpointKey(key)
	if err != nil {
		return ""
	}
	delete(r.owned, name)
	delete(r.foreign, name)
	ep, err := coord.DecodeEndpoint(key, kv.Value)
	if err != nil || ep.GetLabels()[LabelDiscoveredBy] != r.owner {
		// A malformed entry is not the writer's either: leave it alone.
		r.foreign[name] = kv.ModRevision
		return name
	}
	r.owned[name] = ownedEntry{ep: ep, rev: kv.ModRevision, lease: clientv3.LeaseID(kv.Lease)}
	return name
}

// sync makes the owned entries equal to desired: it writes every desired
// entry that is missing, differs or is bound to another lease (unless an
// entry that is not the writer's holds its name) and deletes every owned
// entry that is not desired. It stops at the first failure.
func (r *registry) sync(ctx context.Context, desired map[string]*registryv1.Endpoint) error {
	for _, name := range slices.Sorted(maps.Keys(desired)) {
		want := desired[name]
		if _, ok := r.foreign[name]; ok {
			r.conflict(name)
			continue
		}
		if cur, ok := r.owned[name]; ok && cur.lease == r.lease && proto.Equal(cur.ep, want) {
			continue
		}
		if err := r.put(ctx, name, want); err != nil {
			return err
		}
	}
	for _, name := range slices.Sorted(maps.Keys(r.owned)) {
		if _, ok := desired[name]; ok {
			continue
		}
		if err := r.remove(ctx, name); err != nil {
			return err
		}
	}
	return nil
}

// put writes an entry under the term's lease if the key is as the registry
// last saw it (absent, or owned at a known revision).
func (r *registry) put(ctx context.Context, name string, ep *registryv1.Endpoint) error {
	key := coord.EndpointKey(r.pool, name)
	value, err := coord.EncodeEndpoint(ep)
	if err != nil {
		return err
	}
	for range maxAttempts {
		cur, had := r.owned[name]
		if had && cur.lease == r.lease && proto.Equal(cur.ep, ep) {
			return nil // written already (a response lost to a timeout)
		}
		kv, ok, err := r.txn(ctx, key, cur.rev, clientv3.OpPut(key, string(value), clientv3.WithLease(r.lease)))
		if err != nil {
			return fmt.Errorf("write endpoint %s: %w", key, err)
		}
		if ok {
			r.owned[name] = ownedEntry{ep: ep, rev: kv.ModRevision, lease: r.lease}
			if had {
				r.log.Debug("discovered endpoint updated", "endpoint", name, "address", ep.GetAddress(), "port", ep.GetPort())
			} else {
				r.log.Info("discovered endpoint registered", "endpoint", name, "address", ep.GetAddress(), "port", ep.GetPort(), "model", ep.GetModel())
			}
			return nil
		}
		if kv == nil {
			delete(r.owned, name) // gone: write it anew
			continue
		}
		if r.note(kv); !r.isOwned(name) {
			r.conflict(name)
			return nil
		}
	}
	return fmt.Errorf("write endpoint %s: changed by another writer %d times in a row", key, maxAttempts)
}

// remove deletes an owned entry if it is as the registry last saw it.
func (r *registry) remove(ctx context.Context, name string) error {
	key := coord.EndpointKey(r.pool, name)
	for range maxAttempts {
		cur, had := r.owned[name]
		if !had {
			return nil
		}
		kv, ok, err := r.txn(ctx, key, cur.rev, clientv3.OpDelete(key))
		if err != nil {
			return fmt.Errorf("delete endpoint %s: %w", key, err)
		}
		if ok || kv == nil {
			delete(r.owned, name)
			r.log.Info("discovered endpoint deregistered", "endpoint", name)
			return nil
		}
		if r.note(kv); !r.isOwned(name) {
			return nil // taken over by someone else: no longer the writer's
		}
	}
	return fmt.Errorf("delete endpoint %s: changed by another writer %d times in a row", key, maxAttempts)
}

// conflict logs, once per term, that an entry the writer does not own holds
// the name of a desired entry.
func (r *registry) conflict(name string) {
	if r.warned[name] {
		return
	}
	r.warned[name] = true
	r.log.Warn("an endpoint registered by someone else holds the name of a discovered endpoint; left alone",
		"endpoint", name, "key", coord.EndpointKey(r.pool, name))
}

func (r *registry) isOwned(name string) bool {
	_, ok := r.owned[name]
	return ok
}

// txn runs op if the leader still holds its election key and key's mod
// revision is rev (0: absent). It returns ok with the written revision in
// kv.ModRevision when op ran; otherwise the key's current entry (nil when
// absent). It fails with errFenced when the leadership is gone.
func (r *registry) txn(ctx context.Context, key string, rev int64, op clientv3.Op) (kv *mvccpb.KeyValue, ok bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	resp, err := r.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(r.leaderKey), "=", r.leaderRev),
			clientv3.Compare(clientv3.ModRevision(key), "=", rev)).
		Then(op).
		Else(clientv3.OpGet(r.leaderKey), clientv3.OpGet(key)).
		Commit()
	if err != nil {
		return nil, false, err
	}
	if resp.Succeeded {
		return &mvccpb.KeyValue{Key: []byte(key), ModRevision: resp.Header.GetRevision()}, true, nil
	}
	if leader := resp.Responses[0].GetResponseRange().GetKvs(); len(leader) == 0 || leader[0].CreateRevision != r.leaderRev {
		return nil, false, errFenced
	}
	if kvs := resp.Responses[1].GetResponseRange().GetKvs(); len(kvs) > 0 {
		return kvs[0], false, nil
	}
	return nil, false, nil
}
