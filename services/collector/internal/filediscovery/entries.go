package filediscovery

import (
	"maps"
	"slices"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	registryv1 "github.com/hermod/hermod/libs/api/hermod/registry/v1"
)

// Diff is what a reload changes, by endpoint name (each sorted).
type Diff struct {
	Added, Changed, Removed []string
}

// Empty says whether nothing changes.
func (d Diff) Empty() bool { return len(d.Added)+len(d.Changed)+len(d.Removed) == 0 }

// diff compares two sets of entries, ignoring RegisteredAt.
func diff(old, next map[string]*registryv1.Endpoint) Diff {
	var d Diff
	for _, name := range slices.Sorted(maps.Keys(next)) {
		cur, ok := old[name]
		switch {
		case !ok:
			d.Added = append(d.Added, name)
		case !equalIgnoringTime(cur, next[name]):
			d.Changed = append(d.Changed, name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(old)) {
		if _, ok := next[name]; !ok {
			d.Removed = append(d.Removed, name)
		}
	}
	return d
}

func equalIgnoringTime(a, b *registryv1.Endpoint) bool {
	if a.GetRegisteredAt() == nil && b.GetRegisteredAt() == nil {
		return proto.Equal(a, b)
	}
	a, b = proto.CloneOf(a), proto.CloneOf(b)
	a.RegisteredAt, b.RegisteredAt = nil, nil
	return proto.Equal(a, b)
}

// entrySet is the desired state of the registry: the entries of the last
// good endpoints file. Its methods are safe for concurrent use.
type entrySet struct {
	// changed receives a signal (without blocking; one is enough)
	// whenever the entries change.
	changed chan struct{}
	now     func() time.Time

	mu      sync.Mutex
	entries map[string]*registryv1.Endpoint
}

func newEntrySet() *entrySet {
	return &entrySet{changed: make(chan struct{}, 1), now: time.Now, entries: map[string]*registryv1.Endpoint{}}
}

// replace makes next (entries without RegisteredAt, which it takes over)
// the desired state and returns what changed. An entry keeps the
// RegisteredAt of the entry of its name it replaces, so that an edit of
// other entries does not rewrite it; a new name gets the current time.
func (s *entrySet) replace(next map[string]*registryv1.Endpoint) Diff {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := diff(s.entries, next)
	at := timestamppb.New(s.now())
	for name, ep := range next {
		if cur, ok := s.entries[name]; ok && cur.GetRegisteredAt() != nil {
			ep.RegisteredAt = cur.GetRegisteredAt()
		} else {
			ep.RegisteredAt = at
		}
	}
	s.entries = next
	if !d.Empty() {
		select {
		case s.changed <- struct{}{}:
		default:
		}
	}
	return d
}

// Desired returns the entries by name (shared: not to be changed).
func (s *entrySet) Desired() map[string]*registryv1.Endpoint {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.entries)
}

// Changed receives a value whenever the entries change.
func (s *entrySet) Changed() <-chan struct{} { return s.changed }

// len returns the number of entries.
func (s *entrySet) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.entries)
}
