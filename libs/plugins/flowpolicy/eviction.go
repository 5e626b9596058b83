package flowpolicy

import (
	"encoding/json"
	"time"

	"github.com/hermod/hermod/libs/scheduling"
)

// Eviction policies (the llm-d router's in-flight eviction, switched on
// by flowControl.enableEviction): when requests of a band wait because
// the pool is saturated, flow control may end requests already in flight
// whose priority is lower, to give their capacity to the waiting ones. The
// filter says which requests in flight may be evicted at all, the order
// which of them goes first. The flowControl section names neither: with
// enableEviction the llm-d router (and Hermod's gateway) always uses these
// two, the only ones there are; declaring them in plugins is allowed and
// changes nothing.
const (
	// PriorityThenTimeEviction evicts the lowest priority first and, of
	// equal priorities, the request admitted last (it has the least work
	// done, the least KV cache built up, to lose).
	PriorityThenTimeEviction = "priority-then-time-eviction-order-policy"
	// SheddableEvictionFilter lets only sheddable requests (priority < 0)
	// be evicted: a request of priority 0 or more runs to its end.
	SheddableEvictionFilter = "sheddable-eviction-filter"
)

// EvictionCandidate is what an eviction policy knows of a request in
// flight.
type EvictionCandidate struct {
	// Priority is the request's priority (its band's).
	Priority int
	// Admitted is when flow control let it through to the pool.
	Admitted time.Time
}

// EvictionOrder orders the evictable requests in flight.
type EvictionOrder interface {
	// EvictsBefore reports whether a is to be evicted before b.
	EvictsBefore(a, b EvictionCandidate) bool
}

// EvictionFilter chooses the requests in flight that may be evicted.
type EvictionFilter interface {
	// Evictable reports whether c may be evicted.
	Evictable(c EvictionCandidate) bool
}

// PriorityThenTime is priority-then-time-eviction-order-policy.
type PriorityThenTime struct{}

// EvictsBefore implements EvictionOrder: the lower priority first; of
// equal priorities, the later admitted. Two requests admitted at the same
// instant are equal (neither goes before the other).
func (PriorityThenTime) EvictsBefore(a, b EvictionCandidate) bool {
	if a.Priority != b.Priority {
		return a.Priority < b.Priority
	}
	return a.Admitted.After(b.Admitted)
}

// Sheddable is sheddable-eviction-filter.
type Sheddable struct{}

// Evictable implements EvictionFilter: sheddable requests only.
func (Sheddable) Evictable(c EvictionCandidate) bool { return c.Priority < 0 }

// EvictionPolicy is a declared eviction policy: an order or a filter. In
// the picker it takes part in no scheduling cycle.
type EvictionPolicy struct {
	scheduling.Named
	Order  EvictionOrder  // nil for a filter
	Filter EvictionFilter // nil for an order
}

func init() {
	scheduling.Register(scheduling.Registration{Type: PriorityThenTimeEviction, New: func(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
		if err := scheduling.DecodeParameters(raw, &struct{}{}, h); err != nil {
			return nil, err
		}
		return &EvictionPolicy{Named: scheduling.Named{Type: PriorityThenTimeEviction, Name: name}, Order: PriorityThenTime{}}, nil
	}})
	scheduling.Register(scheduling.Registration{Type: SheddableEvictionFilter, New: func(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
		if err := scheduling.DecodeParameters(raw, &struct{}{}, h); err != nil {
			return nil, err
		}
		return &EvictionPolicy{Named: scheduling.Named{Type: SheddableEvictionFilter, Name: name}, Filter: Sheddable{}}, nil
	}})
}
