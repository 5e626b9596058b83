package coord

import (
	"errors"
	"slices"
	"sync"
	"sync/atomic"

	registryv1 "github.com/hermod/hermod/libs/api/hermod/registry/v1"
)

// Ownership decides which of a pool's endpoints this replica of a service
// handles (scrapes, ingests): those that rendezvous hashing over the live
// members of the service's group assigns to it (Owns), so that each
// endpoint has one handler and only about 1/N of them move when a replica
// comes or goes. Feed it the members (WatchMembers) and the endpoints
// (WatchEndpoints); it calls assign with this replica's endpoints after
// every change.
type Ownership struct {
	pool, self string
	assign     func(mine []*registryv1.Endpoint)

	mu        sync.Mutex
	members   []string
	endpoints []*registryv1.Endpoint
	listed    atomic.Bool
	joined    atomic.Bool
}

// NewOwnership returns the ownership of replica self over pool's endpoints.
func NewOwnership(pool, self string, assign func(mine []*registryv1.Endpoint)) *Ownership {
	return &Ownership{pool: pool, self: self, assign: assign}
}

// SetMembers sets the live members of the group (their ids).
func (o *Ownership) SetMembers(ids []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.members = ids
	if slices.Contains(ids, o.self) {
		o.joined.Store(true)
	}
	o.apply()
}

// SetEndpoints sets the pool's registered endpoints.
func (o *Ownership) SetEndpoints(eps []*registryv1.Endpoint) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.endpoints = eps
	o.listed.Store(true)
	o.apply()
}

// apply hands the owned endpoints over. The caller holds o.mu.
func (o *Ownership) apply() {
	members := o.members
	if !slices.Contains(members, o.self) {
		// Not listed yet (or the membership lease is being renewed): act
		// as if alone rather than leave endpoints unhandled.
		members = append(slices.Clone(members), o.self)
		slices.Sort(members)
	}
	var mine []*registryv1.Endpoint
	for _, ep := range o.endpoints {
		if Owns(members, o.self, EndpointKey(o.pool, ep.GetName())) {
			mine = append(mine, ep)
		}
	}
	o.assign(mine)
}

// Ready reports an error until the endpoints were listed and this replica
// saw itself among the members.
func (o *Ownership) Ready() error {
	if !o.listed.Load() {
		return errors.New("endpoints not listed yet")
	}
	if !o.joined.Load() {
		return errors.New("not a listed member yet")
	}
	return nil
}
