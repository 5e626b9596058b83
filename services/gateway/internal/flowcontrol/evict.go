package flowcontrol

import (
	"container/heap"
	"context"
	"errors"
	"math"
	"time"

	"github.com/hermod/hermod/libs/plugins/flowpolicy"
)

// In-flight eviction (the llm-d router's flowControl.enableEviction).
//
// When requests wait because the pool is saturated (every band with
// requests waiting is at or above its usage-limit ceiling) or its capacity
// is taken, flow control may end requests already in flight whose
// priority is strictly lower than the waiting band's, to hand their room
// over. Which requests may go is the filter's (sheddable-eviction-filter:
// priority < 0), which goes first the order's
// (priority-then-time-eviction-order-policy: the lowest priority, then the
// one admitted last). Requests still queued are never evicted for another
// (a full band or queue refuses the newcomer); only admitted ones are.
//
// A decision evicts at most Eviction.MaxPerDecision requests: as many as
// the saturation's excess over the blocked band's ceiling is worth, each
// request in flight being worth saturation / (requests in flight), and at
// least one; when it is the capacity that is taken, one. The next decision
// waits until every evicted request has ended (its Lease released, or
// Eviction.Timeout passed) and then Eviction.Grace more, for the room it
// freed to show in the saturation reading, so that one shortage never
// evicts twice.
//
// No decision runs while the pool has no endpoint: ending a request would
// free nothing.
//
// An evicted request's Lease context is canceled with the cause
// ErrEvicted. The proxy makes its call to the model server with that
// context, so the call ends (the server aborts the request and frees its
// KV cache), and answers the client 429 with
// x-llm-d-request-dropped-reason: evicted (DroppedEvicted), or, when the
// answer has already started streaming, ends the stream there.

// ErrEvicted is the cause of an evicted request's Lease context: flow
// control ended it, in flight, to free room for a waiting request of
// higher priority. Answer 429 with DroppedReason DroppedEvicted.
var ErrEvicted = errors.New("flow control: the request was evicted to make room for requests of higher priority")

// DroppedEvicted is the x-llm-d-request-dropped-reason an evicted
// request is answered with (the llm-d router's), status 429.
const DroppedEvicted = "evicted"

// Defaults of in-flight eviction (the llm-d router's).
const (
	// DefaultEvictionsPerDecision bounds the requests one decision evicts.
	DefaultEvictionsPerDecision = 2
	// DefaultEvictionGrace is the wait after the last evicted request
	// ended for a saturation read from the pods' metrics: the model
	// server's abort, its KV cache freed, the next scrape.
	DefaultEvictionGrace = 500 * time.Millisecond
	// CountedEvictionGrace is the wait for a saturation the gateway counts
	// itself (concurrency-detector): its count drops when the request ends.
	CountedEvictionGrace = 10 * time.Millisecond
	// DefaultEvictionTimeout is how long an evicted request that does not
	// end may hold the next decision back; after it, it counts as ended.
	DefaultEvictionTimeout = 10 * time.Second
)

// Eviction configures in-flight eviction.
type Eviction struct {
	// Order chooses which evictable request goes first (nil:
	// flowpolicy.PriorityThenTime).
	Order flowpolicy.EvictionOrder
	// Filter chooses the requests in flight that may be evicted (nil:
	// flowpolicy.Sheddable).
	Filter flowpolicy.EvictionFilter
	// MaxPerDecision bounds the requests one decision evicts (0:
	// DefaultEvictionsPerDecision).
	MaxPerDecision int
	// Grace is the wait after the evicted requests ended before the next
	// decision (0: DefaultEvictionGrace).
	Grace time.Duration
	// Timeout is how long an evicted request may take to end (0:
	// DefaultEvictionTimeout).
	Timeout time.Duration
}

// Lease is an admitted request's hold on the pool (Admit). Its Context
// is the request's for the work it was admitted for: flow control cancels
// it with the cause ErrEvicted when it evicts the request. Release it when
// the request ends.
type Lease struct {
	c      *Controller
	req    Request
	at     time.Time
	ctx    context.Context
	cancel context.CancelCauseFunc // nil: not evictable
	// under c.mu
	index    int // in the evictable heap; -1 when not in it
	released bool
}

// Context is the request's context: Admit's, canceled with the cause
// ErrEvicted if the request is evicted.
func (l *Lease) Context() context.Context { return l.ctx }

// Evicted reports whether flow control evicted the request.
func (l *Lease) Evicted() bool { return errors.Is(context.Cause(l.ctx), ErrEvicted) }

// Release ends the request, having used prompt and completion tokens (0
// when unknown): its room goes to the next waiting request. Later calls
// do nothing.
func (l *Lease) Release(prompt, completion int64) {
	c := l.c
	c.mu.Lock()
	if l.released {
		c.mu.Unlock()
		return
	}
	l.released = true
	if c.ev != nil {
		c.ev.ended(l, time.Now(), c)
	}
	c.mu.Unlock()
	c.Finished(l.req, prompt, completion)
	c.Release()
}

// Admit is Acquire giving the admitted request's Lease: with eviction on,
// a request the filter lets go may be evicted while it runs.
func (c *Controller) Admit(ctx context.Context, r Request) (*Lease, error) {
	if err := c.Acquire(ctx, r); err != nil {
		return nil, err
	}
	l := &Lease{c: c, req: r, at: time.Now(), ctx: ctx, index: -1}
	if c.ev == nil || !c.ev.filter.Evictable(l.candidate()) {
		return l, nil
	}
	l.ctx, l.cancel = context.WithCancelCause(ctx)
	c.mu.Lock()
	heap.Push(&c.ev.evictable, l)
	c.mu.Unlock()
	return l, nil
}

func (l *Lease) candidate() flowpolicy.EvictionCandidate {
	return flowpolicy.EvictionCandidate{Priority: l.req.Priority, Admitted: l.at}
}

// evictor is the eviction state. Its fields are under Controller.mu.
type evictor struct {
	max            int
	grace, timeout time.Duration
	order          flowpolicy.EvictionOrder
	filter         flowpolicy.EvictionFilter

	evictable leases
	// outstanding are the evicted requests not yet ended
	outstanding map[*Lease]revocation
	// cooling are the ended ones still in their grace
	cooling []revocation
	// pending is the saturation the outstanding and cooling evictions
	// are expected to free
	pending float64
}

// revocation is an eviction's expected saturation freed (credit) and,
// until the request ends, when it was issued; then when its grace ends.
type revocation struct {
	credit float64
	at     time.Time
}

func newEvictor(e *Eviction) *evictor {
	ev := &evictor{max: e.MaxPerDecision, grace: e.Grace, timeout: e.Timeout, order: e.Order, filter: e.Filter,
		outstanding: map[*Lease]revocation{}}
	if ev.max <= 0 {
		ev.max = DefaultEvictionsPerDecision
	}
	if ev.grace <= 0 {
		ev.grace = DefaultEvictionGrace
	}
	if ev.timeout <= 0 {
		ev.timeout = DefaultEvictionTimeout
	}
	if ev.order == nil {
		ev.order = flowpolicy.PriorityThenTime{}
	}
	if ev.filter == nil {
		ev.filter = flowpolicy.Sheddable{}
	}
	ev.evictable.less = ev.order.EvictsBefore
	return ev
}

// ended accounts for the end of l's request at now. The caller holds
// c.mu.
func (ev *evictor) ended(l *Lease, now time.Time, c *Controller) {
	if l.index >= 0 {
		heap.Remove(&ev.evictable, l.index)
	}
	r, ok := ev.outstanding[l]
	if !ok {
		return
	}
	delete(ev.outstanding, l)
	c.cfg.Metrics.revocationEnded(revocationConfirmed, now.Sub(r.at))
	ev.cool(r, now, c)
}

// cool starts r's grace at now. The caller holds c.mu.
func (ev *evictor) cool(r revocation, now time.Time, c *Controller) {
	ev.cooling = append(ev.cooling, revocation{credit: r.credit, at: now.Add(ev.grace)})
	// look again when the grace ends
	time.AfterFunc(ev.grace, c.Kick)
}

// gateOpen reports whether a decision may run at now: every evicted
// request ended (or timed out) and its grace passed. The caller holds
// c.mu.
func (ev *evictor) gateOpen(now time.Time, c *Controller) bool {
	for l, r := range ev.outstanding {
		if now.Sub(r.at) >= ev.timeout {
			delete(ev.outstanding, l)
			c.cfg.Metrics.revocationEnded(revocationTimedOut, 0)
			ev.cool(r, now, c)
		}
	}
	kept := ev.cooling[:0]
	for _, r := range ev.cooling {
		if now.Before(r.at) {
			kept = append(kept, r)
		} else {
			ev.pending -= r.credit
		}
	}
	ev.cooling = kept
	if len(ev.outstanding) == 0 && len(ev.cooling) == 0 {
		ev.pending = 0
	}
	c.cfg.Metrics.pendingReclaim(ev.pending)
	return len(ev.outstanding) == 0 && len(ev.cooling) == 0
}

// reclaim decides, at saturation sat, whether to evict for the requests
// waiting, and takes the victims out of the evictable heap; the caller
// cancels them once it has let go of c.mu. blocked is the band the
// capacity refused a slot to, nil when every band waiting is at or above
// its ceiling (c.prios and c.ceilings are next's). The caller holds c.mu.
func (c *Controller) reclaim(sat float64, blocked *band) (victims []*Lease, demand int) {
	ev := c.ev
	if ev == nil || ev.evictable.Len() == 0 || c.poolEmpty() {
		// with no endpoint, ending a request frees nothing
		return nil, 0
	}
	now := time.Now()
	if !ev.gateOpen(now, c) {
		return nil, 0
	}
	victim := ev.evictable.items[0].req.Priority
	if blocked != nil {
		// the capacity is taken: one request's room makes room for one
		if blocked.priority <= victim {
			return nil, 0
		}
		credit := 0.0
		if c.running > 0 {
			credit = sat / float64(c.running)
		}
		return c.evictN(1, blocked.priority, credit, now), blocked.priority
	}
	if c.cfg.Saturation == nil {
		return nil, 0 // no ceilings (next is never nil while requests wait)
	}
	for i, p := range c.prios {
		if p <= victim {
			return nil, 0 // no band above the victim waits
		}
		ceiling := c.ceilings[i]
		if ceiling <= 0 {
			// a band held shut whatever the load: no eviction opens it
			continue
		}
		if c.running <= 0 {
			return nil, 0
		}
		credit := sat / float64(c.running)
		if !(credit > 0) || math.IsInf(credit, 0) {
			return nil, 0
		}
		// every band waiting is at or above its ceiling (next found none
		// open), so target >= 0; the gate being open, nothing evicted
		// earlier is still expected to free room. The band dispatches once
		// the saturation is below its ceiling: at the ceiling exactly, one
		// eviction.
		target := sat - ceiling
		c.cfg.Metrics.reclaimTarget(target)
		n := max(1, int(math.Ceil(target/credit)))
		return c.evictN(n, p, credit, now), p
	}
	return nil, 0
}

// evictN takes up to n victims (ev.max at most) from the evictable heap,
// best first, each of priority below bound. The caller holds c.mu.
func (c *Controller) evictN(n, bound int, credit float64, now time.Time) []*Lease {
	ev := c.ev
	n = min(n, ev.max)
	var victims []*Lease
	for len(victims) < n && ev.evictable.Len() > 0 && ev.evictable.items[0].req.Priority < bound {
		l := heap.Pop(&ev.evictable).(*Lease)
		ev.outstanding[l] = revocation{credit: credit, at: now}
		ev.pending += credit
		victims = append(victims, l)
	}
	c.cfg.Metrics.pendingReclaim(ev.pending)
	return victims
}

// revoke cancels the victims' requests, evicted for a band of priority
// demand. The caller does not hold c.mu.
func (c *Controller) revoke(victims []*Lease, demand int) {
	if len(victims) == 0 {
		return
	}
	c.cfg.Metrics.revocationsIssued(demand, len(victims))
	for _, l := range victims {
		l.cancel(ErrEvicted)
	}
}

// Evictable returns how many admitted requests may be evicted now.
func (c *Controller) Evictable() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ev == nil {
		return 0
	}
	return c.ev.evictable.Len()
}

// leases is a heap of evictable leases, the first to evict on top.
type leases struct {
	items []*Lease
	less  func(a, b flowpolicy.EvictionCandidate) bool
}

func (h *leases) Len() int { return len(h.items) }
func (h *leases) Less(i, j int) bool {
	return h.less(h.items[i].candidate(), h.items[j].candidate())
}

func (h *leases) Swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.items[i].index, h.items[j].index = i, j
}

func (h *leases) Push(x any) {
	l := x.(*Lease)
	l.index = len(h.items)
	h.items = append(h.items, l)
}

func (h *leases) Pop() any {
	n := len(h.items) - 1
	l := h.items[n]
	h.items[n] = nil
	h.items = h.items[:n]
	l.index = -1
	return l
}
