// Package flowcontrol admits requests to the pool: it sheds what cannot
// be served now and, in queueing mode, holds the rest in priority bands
// until capacity frees up.
//
// Bands are ordered by priority (higher first). Between bands the order is
// strict unless lower bands have a share: then every band with a positive
// share gets at least that fraction of the dispatches while it has
// requests waiting (so a busy high band cannot starve it), and the rest
// goes by priority. Within a band, flows (the fairness id of
// x-gateway-inference-fairness-id) take turns round-robin, or (global
// strict fairness) the band is one FIFO across its flows; each flow is
// FIFO. Each band is bounded in requests and bytes, and so is the whole
// queue. A waiting request leaves the queue when its TTL passes or its
// client goes away. A band that empties is forgotten, so priorities a
// client makes up do not accumulate. With eviction on (evict.go), a
// request admitted by Admit and of low enough priority may be ended in
// flight to make room for waiting requests of higher priority.
package flowcontrol

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/hermod/hermod/libs/plugins/flowpolicy"
)

// Errors of Acquire.
var (
	// ErrShed: the request is sheddable (priority < 0) and the pool is
	// saturated: answer 429.
	ErrShed = errors.New("flow control: the pool is saturated and the request is sheddable")
	// ErrSaturated: the pool is saturated and queueing is off: answer 503
	// with Retry-After, fast.
	ErrSaturated = errors.New("flow control: the pool is saturated")
	// ErrTTL: the request waited its TTL in the queue while the pool has
	// endpoints: answer 429 (backpressure).
	ErrTTL = errors.New("flow control: the request's time in the queue ran out")
	// ErrQueueFull: the request's band, or the whole queue, is at its
	// bound in requests or bytes: answer 429.
	ErrQueueFull = errors.New("flow control: the queue is full")
	// ErrNoEndpoints wraps ErrTTL or ErrQueueFull when the pool has no
	// endpoint at all: the queue was a waiting room for a pool scaled to
	// zero, and the answer is 503 (unavailable), not backpressure.
	ErrNoEndpoints = errors.New("flow control: the pool has no endpoints")
)

// Defaults of the queue's bounds (the llm-d router's since v0.10).
const (
	DefaultRequestTTL      = 60 * time.Second
	DefaultBandMaxRequests = 5000
	DefaultBandMaxBytes    = 1_000_000_000
	// DefaultMaxQueued bounds the whole queue when nothing else does:
	// bands are made per priority, which clients choose.
	DefaultMaxQueued = 10000
)

// Fairness is how a band chooses among its flows.
type Fairness uint8

const (
	// FairRoundRobin is the band's flows taking turns.
	FairRoundRobin Fairness = iota
	// FairGlobalStrict is the band as one FIFO across its flows (no
	// fairness between tenants; arrival order).
	FairGlobalStrict
	// FairProgramAware is the flow (program) with the least attained
	// service going first (Config.Programs; program-aware-fairness).
	FairProgramAware
)

// Ordering is which request of a flow's queue goes first.
type Ordering uint8

const (
	// OrderArrival is first come, first served (fcfs, and edf: every
	// request waits under one TTL).
	OrderArrival Ordering = iota
	// OrderSLODeadline is the earliest deadline first, a request's deadline
	// being its arrival plus its TTFT SLO (x-llm-d-slo-ttft-ms); requests
	// without one go after those with one, each kind by arrival.
	OrderSLODeadline
)

// Band is a priority band's policy.
type Band struct {
	// MaxRequests and MaxBytes bound the band (0: the default bound).
	MaxRequests int
	MaxBytes    int64
	Fairness    Fairness
	Ordering    Ordering
}

// Request is what admission knows of a request.
type Request struct {
	// Priority orders the bands (higher first); negative is sheddable.
	Priority int
	// Flow is the fairness id (requests of one flow are FIFO; flows take
	// turns).
	Flow string
	// Model labels the queue-size metric.
	Model string
	// Bytes is the request body's size (the queue-bytes metric).
	Bytes int
	// TTL bounds the wait in the queue (0: the controller's default).
	TTL time.Duration
	// TTFTSLO is the request's time-to-first-token SLO (0: none): its
	// deadline in a band ordered by SLO deadline.
	TTFTSLO time.Duration
}

// UsageLimit is a usage-limit policy: Ceilings sets ceilings[i] to the
// saturation ceiling of priorities[i], the priorities of the bands with
// requests waiting, highest first.
type UsageLimit interface {
	Ceilings(saturation float64, priorities []int, ceilings []float64)
}

// Capacity is the room the pool has: TryAcquire takes a slot if one is
// free (the pool not saturated), Release gives one back.
type Capacity interface {
	TryAcquire() bool
	Release()
}

// Config configures a Controller.
type Config struct {
	// Queueing holds requests while the pool is saturated; off, they are
	// shed or refused at once.
	Queueing bool
	// DefaultTTL bounds a request's wait (0: DefaultRequestTTL).
	DefaultTTL time.Duration
	// QueueSheddable queues sheddable requests (priority < 0) in their
	// bands as any other (the llm-d router's flow control) instead of
	// shedding them while the pool is saturated.
	QueueSheddable bool
	// NoTTL lets requests wait until dispatched or their client leaves.
	NoTTL bool
	// MaxQueued bounds the requests waiting (0: DefaultMaxQueued).
	MaxQueued int
	// MaxBytes bounds the bytes of the requests waiting (0: no bound but
	// the bands').
	MaxBytes int64
	// Band is the policy of a priority's band (nil: the defaults, round
	// robin between flows).
	Band func(priority int) Band
	// PoolEmpty reports whether the pool has no endpoint at all (nil:
	// never), to tell unavailability from backpressure.
	PoolEmpty func() bool
	// Saturation, when set, is the pool's saturation (a detector's: 1 is
	// saturated) and UsageLimit the ceilings it is held to: a band's
	// requests are dispatched only while the saturation is below the
	// band's ceiling. Nil UsageLimit: one ceiling, 1.
	Saturation func() float64
	UsageLimit UsageLimit
	// Programs parameterizes the bands of FairProgramAware (nil: their
	// defaults).
	Programs *flowpolicy.ProgramAware
	// Shares are the least fractions of dispatches per priority band
	// while it has requests waiting (bands without one: strict priority).
	Shares map[int]float64
	// Observe, when set, is told the queue size per model on every change.
	Observe func(model string, size int)
	// Metrics, when set, observe GIE's flow-control family.
	Metrics *Metrics
	// Eviction, when set, lets flow control evict admitted requests (those
	// admitted by Admit) for waiting ones of higher priority (nil: an
	// admitted request runs to its end).
	Eviction *Eviction
}

// Controller admits requests. Safe for concurrent use.
type Controller struct {
	cfg Config
	cap Capacity

	mu       sync.Mutex
	bands    map[int]*band
	order    []int // band priorities, highest first
	queued   int
	bytes    int64
	perModel map[string]int
	wake     chan struct{}
	// dispatches since the queue was last empty, for the shares
	total int
	// scratch for the usage limit's ceilings
	prios    []int
	ceilings []float64
	// programs is the program-aware bands' accounts
	programs *programs
	// running counts the requests admitted and not yet released
	running int
	// ev is in-flight eviction's state (nil: off)
	ev *evictor
}

// band is one priority's flows.
type band struct {
	priority   int
	share      float64
	policy     Band
	flows      map[string]*list.List // of *waiter, by queue key
	ring       []string              // queue keys with waiters, round-robin
	next       int
	size       int
	bytes      int64
	dispatched int
}

// waiter is a queued request.
type waiter struct {
	req        Request
	key        string        // its queue in the band: the flow, or "" (global strict)
	at         time.Time     // when it arrived
	ready      chan struct{} // closed when dispatched
	dispatched bool          // popped (under Controller.mu)
}

// New returns a controller over cap.
func New(cfg Config, capacity Capacity) *Controller {
	if cfg.DefaultTTL <= 0 {
		cfg.DefaultTTL = DefaultRequestTTL
	}
	if cfg.MaxQueued <= 0 {
		cfg.MaxQueued = DefaultMaxQueued
	}
	pa := cfg.Programs
	if pa == nil {
		d, _ := flowpolicy.ParseProgramAware(nil, nil)
		pa = &d
	}
	c := &Controller{cfg: cfg, cap: capacity, bands: map[int]*band{}, perModel: map[string]int{}, wake: make(chan struct{}, 1),
		programs: newPrograms(*pa, cfg.Metrics)}
	if cfg.Eviction != nil {
		c.ev = newEvictor(cfg.Eviction)
	}
	return c
}

// Acquire admits the request: at once when the pool has room and nothing
// waits ahead of it; otherwise it sheds it, refuses it, or (queueing)
// waits until it is dispatched, its TTL passes or ctx ends. An admitted
// request holds a slot of the capacity until Release. It is never
// evicted: Admit's requests may be.
func (c *Controller) Acquire(ctx context.Context, r Request) error {
	start := time.Now()
	sat := c.saturation()
	c.mu.Lock()
	if c.queued == 0 && c.below(sat, r.Priority) && c.cap.TryAcquire() {
		c.running++
		if c.programAware(r.Priority) {
			c.programs.admitted(r.Flow, start)
		}
		c.mu.Unlock()
		c.cfg.Metrics.enqueued(r, start, OutcomeDispatched)
		c.cfg.Metrics.finalized(r, start, OutcomeDispatched)
		return nil
	}
	var refused error
	switch {
	case r.Priority < 0 && (!c.cfg.Queueing || !c.cfg.QueueSheddable):
		refused = ErrShed
	case !c.cfg.Queueing:
		refused = ErrSaturated
	case !c.room(r):
		refused = c.unavailable(ErrQueueFull)
	}
	if refused != nil {
		c.mu.Unlock()
		c.cfg.Metrics.enqueued(r, start, OutcomeRejectedCapacity)
		c.cfg.Metrics.finalized(r, start, OutcomeRejectedCapacity)
		return refused
	}
	w := &waiter{req: r, ready: make(chan struct{}), at: start}
	c.push(w)
	c.mu.Unlock()
	c.cfg.Metrics.enqueued(r, start, OutcomeNotYetFinalized)
	c.Dispatch() // capacity may have freed since TryAcquire failed
	err := c.wait(ctx, w)
	outcome := OutcomeDispatched
	switch {
	case errors.Is(err, ErrTTL):
		outcome = OutcomeEvictedTTL
		err = c.unavailable(err)
	case err != nil:
		outcome = OutcomeEvictedContextCancelled
	}
	c.cfg.Metrics.finalized(r, start, outcome)
	return err
}

// wait waits until the queued w is dispatched, its TTL passes or ctx ends.
func (c *Controller) wait(ctx context.Context, w *waiter) error {
	var expired <-chan time.Time
	if ttl := w.req.TTL; ttl > 0 || !c.cfg.NoTTL {
		if ttl <= 0 {
			ttl = c.cfg.DefaultTTL
		}
		timer := time.NewTimer(ttl)
		defer timer.Stop()
		expired = timer.C
	}
	select {
	case <-w.ready:
		return nil
	case <-expired:
		if c.remove(w) {
			return ErrTTL
		}
	case <-ctx.Done():
		if c.remove(w) {
			return ctx.Err()
		}
	}
	// dispatched at the same moment: it holds a slot
	<-w.ready
	if ctx.Err() != nil {
		c.Finished(w.req, 0, 0)
		c.Release()
		return ctx.Err()
	}
	return nil
}

// Finished tells the controller that an admitted request ended having
// used prompt and completion tokens (0 when unknown), before Release: a
// program-aware band credits them to the request's flow.
func (c *Controller) Finished(r Request, prompt, completion int64) {
	if !c.programAware(r.Priority) {
		return
	}
	c.mu.Lock()
	c.programs.finished(r.Flow, prompt, completion, time.Now())
	c.mu.Unlock()
}

// programAware reports whether priority's band is program-aware.
func (c *Controller) programAware(priority int) bool {
	return c.cfg.Band != nil && c.cfg.Band(priority).Fairness == FairProgramAware
}

// Release gives an admitted request's slot back, and admits the next
// waiting request into it. A Lease is released with Lease.Release.
func (c *Controller) Release() {
	c.cap.Release()
	c.dispatch(true)
}

// Kick asks the dispatcher to look at the queue (a request finished, the
// pool's metrics changed).
func (c *Controller) Kick() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// Run dispatches waiting requests while the pool has room, until ctx
// ends; it looks again on every Kick and every poll interval.
func (c *Controller) Run(ctx context.Context, poll time.Duration) {
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		c.Dispatch()
		select {
		case <-ctx.Done():
			return
		case <-c.wake:
		case <-t.C:
		}
	}
}

// Dispatch admits waiting requests, best first, while the pool has room;
// it returns how many it admitted.
func (c *Controller) Dispatch() int { return c.dispatch(false) }

// dispatch is Dispatch, after a request was released (released: it
// leaves the count of those running).
func (c *Controller) dispatch(released bool) int {
	start := time.Now()
	defer c.cfg.Metrics.dispatched(start)
	n := 0
	for {
		c.mu.Lock()
		if released && c.running > 0 {
			c.running--
		}
		released = false
		idle := c.queued == 0
		c.mu.Unlock()
		if idle {
			return n
		}
		sat := c.saturation() // not under c.mu
		c.mu.Lock()
		b := c.next(sat)
		if b == nil || !c.cap.TryAcquire() {
			// the requests waiting are held back: evict for them?
			var victims []*Lease
			demand := 0
			if c.queued > 0 {
				victims, demand = c.reclaim(sat, b)
			}
			c.mu.Unlock()
			c.revoke(victims, demand)
			return n
		}
		w := c.take(b)
		c.mu.Unlock()
		close(w.ready)
		n++
	}
}

// Queued returns how many requests wait.
func (c *Controller) Queued() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.queued
}

// Bands returns how many priority bands exist (an emptied one is
// forgotten, so priorities clients chose do not pile up).
func (c *Controller) Bands() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.bands)
}

// poolEmpty reports whether the pool has no endpoint at all.
func (c *Controller) poolEmpty() bool { return c.cfg.PoolEmpty != nil && c.cfg.PoolEmpty() }

// unavailable wraps err (a TTL or a full queue) with ErrNoEndpoints when
// the pool has no endpoint.
func (c *Controller) unavailable(err error) error {
	if c.poolEmpty() {
		return fmt.Errorf("%w: %w", err, ErrNoEndpoints)
	}
	return err
}

// policy is the band policy of priority, its bounds defaulted.
func (c *Controller) policy(priority int) Band {
	var b Band
	if c.cfg.Band != nil {
		b = c.cfg.Band(priority)
	}
	if b.MaxRequests <= 0 {
		b.MaxRequests = DefaultBandMaxRequests
	}
	if b.MaxBytes <= 0 {
		b.MaxBytes = DefaultBandMaxBytes
	}
	return b
}

// room reports whether r fits in its band and in the queue. The caller
// holds c.mu.
func (c *Controller) room(r Request) bool {
	size := int64(r.Bytes)
	if c.queued >= c.cfg.MaxQueued || (c.cfg.MaxBytes > 0 && c.bytes+size > c.cfg.MaxBytes) {
		return false
	}
	if b := c.bands[r.Priority]; b != nil {
		return b.size < b.policy.MaxRequests && b.bytes+size <= b.policy.MaxBytes
	}
	p := c.policy(r.Priority)
	return p.MaxRequests > 0 && size <= p.MaxBytes
}

func (c *Controller) push(w *waiter) {
	b := c.bands[w.req.Priority]
	if b == nil {
		b = &band{priority: w.req.Priority, share: c.cfg.Shares[w.req.Priority], policy: c.policy(w.req.Priority), flows: map[string]*list.List{}}
		c.bands[w.req.Priority] = b
		c.order = append(c.order, w.req.Priority)
		sort.Sort(sort.Reverse(sort.IntSlice(c.order)))
	}
	switch b.policy.Fairness {
	case FairRoundRobin:
		w.key = w.req.Flow
	case FairProgramAware:
		w.key = w.req.Flow
		c.programs.queue(w.key, w.at)
	}
	q := b.flows[w.key]
	if q == nil {
		q = list.New()
		b.flows[w.key] = q
	}
	if q.Len() == 0 {
		b.ring = append(b.ring, w.key)
	}
	if b.policy.Ordering == OrderSLODeadline {
		insertByDeadline(q, w)
	} else {
		q.PushBack(w)
	}
	b.size++
	b.bytes += int64(w.req.Bytes)
	c.queued++
	c.bytes += int64(w.req.Bytes)
	c.count(w.req.Model, 1)
	c.cfg.Metrics.managed(w.req, 1)
}

// saturation is the pool's saturation, 0 without a detector (the
// capacity gates alone).
func (c *Controller) saturation() float64 {
	if c.cfg.Saturation == nil {
		return 0
	}
	return c.cfg.Saturation()
}

// below reports whether a request of priority, alone in the queue, is
// under its ceiling at saturation sat. The caller holds c.mu.
func (c *Controller) below(sat float64, priority int) bool {
	if c.cfg.Saturation == nil {
		return true
	}
	c.prios = append(c.prios[:0], priority)
	return sat < c.ceiling(sat)[0]
}

// ceiling computes the ceilings of c.prios into c.ceilings. The caller
// holds c.mu.
func (c *Controller) ceiling(sat float64) []float64 {
	c.ceilings = slices.Grow(c.ceilings[:0], len(c.prios))[:len(c.prios)]
	if c.cfg.UsageLimit == nil {
		for i := range c.ceilings {
			c.ceilings[i] = 1
		}
	} else {
		c.cfg.UsageLimit.Ceilings(sat, c.prios, c.ceilings)
	}
	return c.ceilings
}

// next is the band to dispatch from at saturation sat: the band owed its
// share first, else the highest band; only bands under their ceiling
// count. Nil when none is. The caller holds c.mu.
func (c *Controller) next(sat float64) *band {
	if c.queued == 0 {
		return nil
	}
	c.prios = c.prios[:0]
	for _, p := range c.order {
		if c.bands[p].size > 0 {
			c.prios = append(c.prios, p)
		}
	}
	open := func(int) bool { return true }
	if c.cfg.Saturation != nil {
		ceilings := c.ceiling(sat)
		open = func(i int) bool { return sat < ceilings[i] }
	}
	for i, p := range c.prios {
		b := c.bands[p]
		if b.share > 0 && float64(b.dispatched) < b.share*float64(c.total+1) && open(i) {
			return b
		}
	}
	for i, p := range c.prios {
		if open(i) {
			return c.bands[p]
		}
	}
	return nil
}

// take removes the next request of band pick: the next flow's oldest.
// The caller holds c.mu.
func (c *Controller) take(pick *band) *waiter {
	if pick.policy.Fairness == FairProgramAware {
		now := time.Now()
		pick.next = c.programs.pick(pick.ring, func(flow string) time.Time {
			return pick.flows[flow].Front().Value.(*waiter).at
		}, now)
	}
	flow := pick.ring[pick.next%len(pick.ring)]
	q := pick.flows[flow]
	w := q.Remove(q.Front()).(*waiter)
	w.dispatched = true
	if pick.policy.Fairness == FairProgramAware {
		c.programs.unqueue(flow, true, w.at, time.Now())
	}
	if q.Len() == 0 {
		i := pick.next % len(pick.ring)
		pick.ring = append(pick.ring[:i], pick.ring[i+1:]...)
		delete(pick.flows, flow)
	} else {
		pick.next++
	}
	if len(pick.ring) > 0 {
		pick.next %= len(pick.ring)
	} else {
		pick.next = 0
	}
	c.left(pick, w)
	c.running++
	pick.dispatched++
	c.total++
	if c.queued == 0 {
		// a busy period ends: shares count afresh in the next one
		c.total = 0
		for _, b := range c.bands {
			b.dispatched = 0
		}
	}
	c.forgetIfEmpty(pick)
	return w
}

// left accounts for w leaving band b's queue. The caller holds c.mu.
func (c *Controller) left(b *band, w *waiter) {
	b.size--
	b.bytes -= int64(w.req.Bytes)
	c.queued--
	c.bytes -= int64(w.req.Bytes)
	c.count(w.req.Model, -1)
	c.cfg.Metrics.managed(w.req, -1)
}

// forgetIfEmpty drops an empty band that has no share to account for (a
// band with one keeps its dispatch count for the busy period). The
// caller holds c.mu.
func (c *Controller) forgetIfEmpty(b *band) {
	if b.size > 0 || b.share > 0 {
		return
	}
	delete(c.bands, b.priority)
	if i := slices.Index(c.order, b.priority); i >= 0 {
		c.order = slices.Delete(c.order, i, i+1)
	}
}

// remove takes a waiter out of the queue; false when it was dispatched.
func (c *Controller) remove(w *waiter) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if w.dispatched {
		return false
	}
	b := c.bands[w.req.Priority]
	q := b.flows[w.key]
	for e := q.Front(); e != nil; e = e.Next() {
		if e.Value.(*waiter) == w {
			q.Remove(e)
			break
		}
	}
	if q.Len() == 0 {
		for i, f := range b.ring {
			if f == w.key {
				b.ring = append(b.ring[:i], b.ring[i+1:]...)
				if b.next > i {
					b.next--
				}
				break
			}
		}
		delete(b.flows, w.key)
	}
	if b.policy.Fairness == FairProgramAware {
		c.programs.unqueue(w.key, false, w.at, time.Now())
	}
	c.left(b, w)
	c.forgetIfEmpty(b)
	return true
}

func (c *Controller) count(model string, d int) {
	c.perModel[model] += d
	n := c.perModel[model]
	if n == 0 {
		delete(c.perModel, model)
	}
	if c.cfg.Observe != nil {
		c.cfg.Observe(model, n)
	}
}

// deadline is w's SLO deadline; ok is false when it has none.
func (w *waiter) deadline() (time.Time, bool) {
	if w.req.TTFTSLO <= 0 {
		return time.Time{}, false
	}
	return w.at.Add(w.req.TTFTSLO), true
}

// insertByDeadline puts w in q, ordered by deadline (those without one
// last), after the requests of an equal deadline: from the back, since
// arrivals are mostly later than those queued.
func insertByDeadline(q *list.List, w *waiter) {
	d, ok := w.deadline()
	for e := q.Back(); e != nil; e = e.Prev() {
		od, ook := e.Value.(*waiter).deadline()
		if !ok || (ook && !d.Before(od)) {
			q.InsertAfter(w, e)
			return
		}
	}
	q.PushFront(w)
}
