// Package flight tracks requests in flight per endpoint for the stateful
// scheduling plugins whose state is a projection of the decision and
// completion streams: active-request-scorer counts them,
// predicted-latency-scorer also reads what each carries (its tokens and
// predictions) and learns from each finished one.
package flight

import (
	"sync"
	"time"

	"github.com/hermod/hermod/libs/scheduling"
)

// Tracker holds the requests in flight per endpoint, keyed by a request key
// K that must be unique per request (the scheduler's decision ids, not
// client-supplied request ids). A request is started with the endpoints it
// occupies, at the time it was decided, and a start value S; it is done
// once, with a done value D.
//
// Events may be redelivered, replayed, and arrive out of order (starts and
// completions travel on different streams), so that replicas fed the same
// events in any order hold the same state: a second start or done of a key
// changes nothing; a done that arrives before its start is remembered (with
// its value), so the start counts nothing; a finished key is remembered
// until the timeout so a late redelivered start does not count it again; a
// start older than the timeout is not counted at all; a request not done
// within the timeout is dropped. Entries expire by time, oldest first,
// whatever order they arrived in. When both halves of a request have
// arrived, in either order, the pair function (SetPair) sees them once.
// It is safe for concurrent use.
type Tracker[K comparable, S, D any] struct {
	mu         sync.Mutex
	timeout    time.Duration
	now        func() time.Time
	pair       func(id K, started time.Time, s *S, d *D)
	counts     map[uint64]int     // by endpoint NameHash
	byEndpoint map[uint64][]int32 // in-flight entries by endpoint NameHash
	requests   map[K]int32        // index in entries
	entries    []entry[K, S, D]   // slab; freed slots are listed in free
	free       []int32
	live       int
	byAge      ageHeap[K, S, D] // indexes of every entry, oldest first
}

// entry is one request, in flight or done. Its endpoints are inline[:n],
// or more when a request occupies more than two (a disaggregated request
// with encode).
type entry[K comparable, S, D any] struct {
	id       K
	started  time.Time
	hasStart bool // the start arrived (a done may come first)
	done     bool
	n        uint8
	inline   [2]string
	more     []string
	start    S
	end      D
}

func (e *entry[K, S, D]) endpoints() []string {
	if e.more != nil {
		return e.more
	}
	return e.inline[:e.n]
}

// NewTracker returns a tracker dropping requests older than timeout.
func NewTracker[K comparable, S, D any](timeout time.Duration, now func() time.Time) *Tracker[K, S, D] {
	if now == nil {
		now = time.Now
	}
	t := &Tracker[K, S, D]{timeout: timeout, now: now, counts: map[uint64]int{}, byEndpoint: map[uint64][]int32{}, requests: map[K]int32{}}
	t.byAge.t = t
	return t
}

// SetPair sets the function that sees each request whose start and done
// have both arrived, once, under the tracker's lock (it must not call the
// tracker). started is the start's time.
func (t *Tracker[K, S, D]) SetPair(fn func(id K, started time.Time, s *S, d *D)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pair = fn
}

// Start records request id as in flight on endpoints, now.
func (t *Tracker[K, S, D]) Start(id K, endpoints []string) {
	var zero S
	t.StartWith(id, endpoints, t.now(), zero)
}

// StartAt records request id as in flight on endpoints since started.
func (t *Tracker[K, S, D]) StartAt(id K, endpoints []string, started time.Time) {
	var zero S
	t.StartWith(id, endpoints, started, zero)
}

// StartWith records request id as in flight on endpoints since started,
// carrying s. An id already started (in flight, or finished within the
// timeout) is left as it is, and a start already older than the timeout is
// not counted. The start of an id whose done came first counts nothing;
// the pair function sees both.
func (t *Tracker[K, S, D]) StartWith(id K, endpoints []string, started time.Time, s S) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	t.expire(now)
	if started.Before(now.Add(-t.timeout)) {
		return
	}
	if i, ok := t.requests[id]; ok {
		e := &t.entries[i]
		if e.hasStart {
			return
		}
		// the done came first
		e.hasStart, e.start = true, s
		if t.pair != nil {
			t.pair(id, started, &e.start, &e.end)
		}
		return
	}
	e := &t.entries[t.newEntry(id, started)]
	e.hasStart, e.start = true, s
	if len(endpoints) <= len(e.inline) {
		e.n = uint8(copy(e.inline[:], endpoints))
	} else {
		e.more = append([]string(nil), endpoints...)
	}
	i := t.requests[id]
	for _, name := range endpoints {
		h := scheduling.NameHash(name)
		t.counts[h]++
		t.byEndpoint[h] = append(t.byEndpoint[h], i)
	}
	t.live++
}

// Done records that request id ended.
func (t *Tracker[K, S, D]) Done(id K) {
	var zero D
	t.DoneWith(id, zero)
}

// DoneWith records that request id ended, with d. For an id not started
// yet, it remembers (for the timeout) that the id is done, and d, so that
// its start, when it arrives, counts nothing and pairs with d.
func (t *Tracker[K, S, D]) DoneWith(id K, d D) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	t.expire(now)
	i, ok := t.requests[id]
	switch {
	case !ok:
		e := &t.entries[t.newEntry(id, now)]
		e.done, e.end = true, d
	case !t.entries[i].done:
		e := &t.entries[i]
		e.end = d
		t.finish(i)
		if t.pair != nil {
			t.pair(id, e.started, &e.start, &e.end)
		}
	}
}

// SetTimeout changes the timeout for every request from now on.
func (t *Tracker[K, S, D]) SetTimeout(timeout time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.timeout = timeout
}

// InFlight returns the in-flight count of an endpoint.
func (t *Tracker[K, S, D]) InFlight(endpoint string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.expire(t.now())
	return t.counts[scheduling.NameHash(endpoint)]
}

// Len returns the number of requests in flight.
func (t *Tracker[K, S, D]) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.expire(t.now())
	return t.live
}

// Counts writes the in-flight count of eps[i] into dst[i] and returns dst.
func (t *Tracker[K, S, D]) Counts(eps []*scheduling.Endpoint, dst []float64) []float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.expire(t.now())
	if len(t.counts) == 0 {
		clear(dst)
		return dst
	}
	for i, e := range eps {
		dst[i] = float64(t.counts[e.NameHash()])
	}
	return dst
}

// Each calls fn for every request in flight on the endpoint whose
// NameHash is endpoint, with how long it has been in flight (never
// negative) and its start value, under the tracker's lock (fn must not
// call the tracker).
func (t *Tracker[K, S, D]) Each(endpoint uint64, fn func(elapsed time.Duration, s *S)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	t.expire(now)
	for _, i := range t.byEndpoint[endpoint] {
		fn(max(now.Sub(t.entries[i].started), 0), &t.entries[i].start)
	}
}

// newEntry adds an entry for id in a free slot of the slab and returns
// the slot.
func (t *Tracker[K, S, D]) newEntry(id K, started time.Time) int32 {
	var i int32
	if n := len(t.free); n > 0 {
		i, t.free = t.free[n-1], t.free[:n-1]
	} else {
		i = int32(len(t.entries))
		var zero entry[K, S, D]
		t.entries = append(t.entries, zero)
	}
	t.entries[i] = entry[K, S, D]{id: id, started: started}
	t.requests[id] = i
	t.byAge.push(i)
	return i
}

// finish releases the endpoints of the request in slot i; the entry stays,
// done, until it expires.
func (t *Tracker[K, S, D]) finish(i int32) {
	e := &t.entries[i]
	for _, name := range e.endpoints() {
		h := scheduling.NameHash(name)
		if n := t.counts[h] - 1; n > 0 {
			t.counts[h] = n
		} else {
			delete(t.counts, h)
		}
		t.unlist(h, i)
	}
	e.done = true
	t.live--
}

// unlist removes slot i from an endpoint's in-flight list.
func (t *Tracker[K, S, D]) unlist(h uint64, i int32) {
	l := t.byEndpoint[h]
	for j, k := range l {
		if k == i {
			l[j] = l[len(l)-1]
			l = l[:len(l)-1]
			break
		}
	}
	if len(l) == 0 {
		delete(t.byEndpoint, h)
		return
	}
	t.byEndpoint[h] = l
}

// expire drops the entries started more than the timeout ago, finishing
// those still in flight.
func (t *Tracker[K, S, D]) expire(now time.Time) {
	deadline := now.Add(-t.timeout)
	for len(t.byAge.idx) > 0 && t.entries[t.byAge.idx[0]].started.Before(deadline) {
		i := t.byAge.pop()
		e := &t.entries[i]
		if !e.done {
			t.finish(i)
		}
		delete(t.requests, e.id)
		t.entries[i] = entry[K, S, D]{}
		t.free = append(t.free, i)
	}
}

// ageHeap is a binary min-heap of slab indexes by their entries' start
// times (typed, so that pushing allocates nothing).
type ageHeap[K comparable, S, D any] struct {
	t   *Tracker[K, S, D]
	idx []int32
}

func (h *ageHeap[K, S, D]) less(i, j int) bool {
	return h.t.entries[h.idx[i]].started.Before(h.t.entries[h.idx[j]].started)
}

func (h *ageHeap[K, S, D]) push(x int32) {
	h.idx = append(h.idx, x)
	for i := len(h.idx) - 1; i > 0; {
		parent := (i - 1) / 2
		if !h.less(i, parent) {
			break
		}
		h.idx[i], h.idx[parent] = h.idx[parent], h.idx[i]
		i = parent
	}
}

func (h *ageHeap[K, S, D]) pop() int32 {
	top := h.idx[0]
	n := len(h.idx) - 1
	h.idx[0] = h.idx[n]
	h.idx = h.idx[:n]
	for i := 0; ; {
		least, l, r := i, 2*i+1, 2*i+2
		if l < n && h.less(l, least) {
			least = l
		}
		if r < n && h.less(r, least) {
			least = r
		}
		if least == i {
			break
		}
		h.idx[i], h.idx[least] = h.idx[least], h.idx[i]
		i = least
	}
	return top
}
