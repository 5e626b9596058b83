// Package flowcontrol admits requests to the pool: it sheds what cannot
// be served now and, in queueing mode, holds the rest in priority bands
// until capacity frees up.
//
// Bands are ordered by priority (higher first). Between bands the order is
// strict unless lower bands have a share: then every band with a positive
// share gets at least that fraction of the dispatches while it has
// requests waiting (so a busy high band cannot starve it), and the rest
// goes by priority. Within a band, flows (the fairness id of
// x-gateway-inference-fairness-id) take turns round-robin, and each flow is
// FIFO. A waiting request leaves the queue when its TTL passes (503) or
// its client goes away.
package flowcontrol

import (
	"container/list"
	"context"
	"errors"
	"sort"
	"sync"
	"time"
)

// Errors of Acquire.
var (
	// ErrShed: the request is sheddable (priority < 0) and the pool is
	// saturated: answer 429.
	ErrShed = errors.New("flow control: the pool is saturated and the request is sheddable")
	// ErrSaturated: the pool is saturated and queueing is off: answer 503
	// with Retry-After, fast.
	ErrSaturated = errors.New("flow control: the pool is saturated")
	// ErrTTL: the request waited its TTL in the queue: answer 503.
	ErrTTL = errors.New("flow control: the request's time in the queue ran out")
	// ErrQueueFull: the queue holds MaxQueued requests already: 503.
	ErrQueueFull = errors.New("flow control: the queue is full")
)

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
	// DefaultTTL bounds a request's wait (default 30s).
	DefaultTTL time.Duration
	// MaxQueued bounds the requests waiting (default 10000).
	MaxQueued int
	// Shares are the least fractions of dispatches per priority band
	// while it has requests waiting (bands without one: strict priority).
	Shares map[int]float64
	// Observe, when set, is told the queue size per model on every change.
	Observe func(model string, size int)
	// Metrics, when set, observe GIE's flow-control family.
	Metrics *Metrics
}

// Controller admits requests. Safe for concurrent use.
type Controller struct {
	cfg Config
	cap Capacity

	mu       sync.Mutex
	bands    map[int]*band
	order    []int // band priorities, highest first
	queued   int
	perModel map[string]int
	wake     chan struct{}
	// dispatches since the queue was last empty, for the shares
	total int
}

// band is one priority's flows.
type band struct {
	priority   int
	share      float64
	flows      map[string]*list.List // of *waiter
	ring       []string              // flows with waiters, round-robin
	next       int
	size       int
	dispatched int
}

// waiter is a queued request.
type waiter struct {
	req        Request
	ready      chan struct{} // closed when dispatched
	dispatched bool          // popped (under Controller.mu)
}

// New returns a controller over cap.
func New(cfg Config, capacity Capacity) *Controller {
	if cfg.DefaultTTL <= 0 {
		cfg.DefaultTTL = 30 * time.Second
	}
	if cfg.MaxQueued <= 0 {
		cfg.MaxQueued = 10000
	}
	return &Controller{cfg: cfg, cap: capacity, bands: map[int]*band{}, perModel: map[string]int{}, wake: make(chan struct{}, 1)}
}

// Acquire admits the request: at once when the pool has room and nothing
// waits ahead of it; otherwise it sheds it, refuses it, or (queueing)
// waits until it is dispatched, its TTL passes or ctx ends. An admitted
// request holds a slot of the capacity until Release.
func (c *Controller) Acquire(ctx context.Context, r Request) error {
	start := time.Now()
	c.mu.Lock()
	if c.queued == 0 && c.cap.TryAcquire() {
		c.mu.Unlock()
		c.cfg.Metrics.enqueued(r, start, OutcomeDispatched)
		c.cfg.Metrics.finalized(r, start, OutcomeDispatched)
		return nil
	}
	var refused error
	switch {
	case r.Priority < 0:
		refused = ErrShed
	case !c.cfg.Queueing:
		refused = ErrSaturated
	case c.queued >= c.cfg.MaxQueued:
		refused = ErrQueueFull
	}
	if refused != nil {
		c.mu.Unlock()
		c.cfg.Metrics.enqueued(r, start, OutcomeRejectedCapacity)
		c.cfg.Metrics.finalized(r, start, OutcomeRejectedCapacity)
		return refused
	}
	w := &waiter{req: r, ready: make(chan struct{})}
	c.push(w)
	c.mu.Unlock()
	c.cfg.Metrics.enqueued(r, start, OutcomeNotYetFinalized)
	c.Dispatch() // capacity may have freed since TryAcquire failed
	err := c.wait(ctx, w)
	outcome := OutcomeDispatched
	switch {
	case errors.Is(err, ErrTTL):
		outcome = OutcomeEvictedTTL
	case err != nil:
		outcome = OutcomeEvictedContextCancelled
	}
	c.cfg.Metrics.finalized(r, start, outcome)
	return err
}

// wait waits until the queued w is dispatched, its TTL passes or ctx ends.
func (c *Controller) wait(ctx context.Context, w *waiter) error {
	ttl := w.req.TTL
	if ttl <= 0 {
		ttl = c.cfg.DefaultTTL
	}
	timer := time.NewTimer(ttl)
	defer timer.Stop()
	select {
	case <-w.ready:
		return nil
	case <-timer.C:
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
		c.Release()
		return ctx.Err()
	}
	return nil
}

// Release gives an admitted request's slot back, and admits the next
// waiting request into it.
func (c *Controller) Release() {
	c.cap.Release()
	c.Dispatch()
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
func (c *Controller) Dispatch() int {
	start := time.Now()
	defer c.cfg.Metrics.dispatched(start)
	n := 0
	for {
		c.mu.Lock()
		if c.queued == 0 || !c.cap.TryAcquire() {
			c.mu.Unlock()
			return n
		}
		w := c.pop()
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

func (c *Controller) push(w *waiter) {
	b := c.bands[w.req.Priority]
	if b == nil {
		b = &band{priority: w.req.Priority, share: c.cfg.Shares[w.req.Priority], flows: map[string]*list.List{}}
		c.bands[w.req.Priority] = b
		c.order = append(c.order, w.req.Priority)
		sort.Sort(sort.Reverse(sort.IntSlice(c.order)))
	}
	q := b.flows[w.req.Flow]
	if q == nil {
		q = list.New()
		b.flows[w.req.Flow] = q
	}
	if q.Len() == 0 {
		b.ring = append(b.ring, w.req.Flow)
	}
	q.PushBack(w)
	b.size++
	c.queued++
	c.count(w.req.Model, 1)
	c.cfg.Metrics.managed(w.req, 1)
}

// pop takes the next request: the band owed its share first, else the
// highest band; in it, the next flow's oldest request. The caller holds
// c.mu and c.queued > 0.
func (c *Controller) pop() *waiter {
	var pick *band
	for _, p := range c.order {
		b := c.bands[p]
		if b.size > 0 && b.share > 0 && float64(b.dispatched) < b.share*float64(c.total+1) {
			pick = b
			break
		}
	}
	if pick == nil {
		for _, p := range c.order {
			if b := c.bands[p]; b.size > 0 {
				pick = b
				break
			}
		}
	}
	if pick == nil {
		return nil
	}
	flow := pick.ring[pick.next%len(pick.ring)]
	q := pick.flows[flow]
	w := q.Remove(q.Front()).(*waiter)
	w.dispatched = true
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
	pick.size--
	c.queued--
	c.count(w.req.Model, -1)
	c.cfg.Metrics.managed(w.req, -1)
	pick.dispatched++
	c.total++
	if c.queued == 0 {
		// a busy period ends: shares count afresh in the next one
		c.total = 0
		for _, b := range c.bands {
			b.dispatched = 0
		}
	}
	return w
}

// remove takes a waiter out of the queue; false when it was dispatched.
func (c *Controller) remove(w *waiter) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if w.dispatched {
		return false
	}
	b := c.bands[w.req.Priority]
	q := b.flows[w.req.Flow]
	for e := q.Front(); e != nil; e = e.Next() {
		if e.Value.(*waiter) == w {
			q.Remove(e)
			break
		}
	}
	if q.Len() == 0 {
		for i, f := range b.ring {
			if f == w.req.Flow {
				b.ring = append(b.ring[:i], b.ring[i+1:]...)
				if b.next > i {
					b.next--
				}
				break
			}
		}
		delete(b.flows, w.req.Flow)
	}
	b.size--
	c.queued--
	c.count(w.req.Model, -1)
	c.cfg.Metrics.managed(w.req, -1)
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
