package coord

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	registryv1 "github.com/hermod/hermod/libs/api/hermod/registry/v1"
)

// ShareOptions say how a service's replicas split a pool's endpoints.
type ShareOptions struct {
	// Pool is the pool whose endpoints are split; Group the membership
	// group of the service's replicas ("collector-<pool>"); Replica this
	// replica's id in it, TTL its lease's.
	Pool, Group, Replica string
	TTL                  time.Duration
	// Assign gets this replica's endpoints after every change.
	Assign func(mine []*registryv1.Endpoint)
	// OnEndpoints, when set, also gets every snapshot of the pool's
	// endpoints (after the ownership has seen it).
	OnEndpoints func(Snapshot)
}

// Sharing is a replica's membership of its group and its share of the
// endpoints.
type Sharing struct {
	*Ownership
	member  *Membership
	members *MembersWatcher
	eps     *Watcher
}

// Share joins the group and follows its members and the pool's endpoints,
// handing this replica's share to Assign: each endpoint has one replica,
// and about 1/N of them move when a replica comes or goes. Close leaves.
func Share(ctx context.Context, cli *clientv3.Client, o ShareOptions, opts ...Option) (*Sharing, error) {
	s := &Sharing{Ownership: NewOwnership(o.Pool, o.Replica, o.Assign)}
	var err error
	if s.member, err = Join(ctx, cli, o.Group, o.Replica, o.TTL, opts...); err != nil {
		return nil, err
	}
	if s.members, err = WatchMembers(ctx, cli, o.Group, func(ms []Member) { s.SetMembers(MemberIDs(ms)) }, opts...); err != nil {
		s.Close()
		return nil, err
	}
	s.eps, err = WatchEndpoints(ctx, cli, o.Pool, func(snap Snapshot) {
		s.SetEndpoints(snap.Sorted())
		if o.OnEndpoints != nil {
			o.OnEndpoints(snap)
		}
	}, opts...)
	if err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Close stops following and leaves the group (its lease revoked, within
// 5 s).
func (s *Sharing) Close() {
	if s.eps != nil {
		s.eps.Close()
	}
	if s.members != nil {
		s.members.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.member.Close(ctx)
}
