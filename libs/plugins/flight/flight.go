package activerequest

import (
	"sync"
	"time"

	"github.com/hermod/hermod/libs/scheduling"
)

// Tracker counts in-flight requests per endpoint, keyed by a request key K
// that must be unique per request (the scorer uses the scheduler's decision
// ids, not client-supplied request ids). A request is started with the
// endpoints it occupies, at the time it was decided, and done once.
//
// Events may be redelivered, replayed, and arrive out of order (starts and
// completions travel on different streams), so that replicas fed the same
// events in any order hold the same counts: a second start or done of a key
// changes nothing; a done that arrives before its start is remembered, so
// the start counts nothing; a finished key is remembered until the timeout
// so a late redelivered start does not count it again; a start older than
// the timeout is not counted at all; a request not done within the timeout
// is dropped. Entries expire by time, oldest first, whatever order they
// arrived in. It is safe for concurrent use.
type Tracker[K comparable] struct {
	mu       sync.Mutex
	timeout  time.Duration
	now      func() time.Time
	counts   map[uint64]int // by endpoint NameHash
	requests map[K]int32    // index in entries
	entries  []entry[K]     // slab; freed slots are listed in free
	free     []int32
	live     int
	byAge    ageHeap[K] // indexes of every entry, oldest first
}

// entry is one request, in flight or done. Its endpoints are inline[:n],
// or more when a request occupies more than two (a disaggregated request
// with encode).
type entry[K comparable] struct {
	id      K
	started time.Time
	done    bool
	n       uint8
	inline  [2]string
	more    []string
}

func (e *entry[K]) endpoints() []string {
	if e.more != nil {
		return e.more
	}
	return e.inline[:e.n]
}

// NewTracker returns a tracker dropping requests older than timeout.
func NewTracker[K comparable](timeout time.Duration, now func() time.Time) *Tracker[K] {
	if now == nil {
		now = time.Now
	}
	t := &Tracker[K]{timeout: timeout, now: now, counts: map[uint64]int{}, requests: map[K]int32{}}
	t.byAge.t = t
	return t
}

// Start records request id as in flight on endpoints, now.
func (t *Tracker[K]) Start(id K, endpoints []string) { t.StartAt(id, endpoints, t.now()) }

// StartAt records request id as in flight on endpoints since started. An id
// already known (in flight, or finished within the timeout) is left as it
// is, and a start already older than the timeout is not counted.
func (t *Tracker[K]) StartAt(id K, endpoints []string, started time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	t.expire(now)
	if _, ok := t.requests[id]; ok || started.Before(now.Add(-t.timeout)) {
		return
	}
	e := &t.entries[t.newEntry(id, started)]
	if len(endpoints) <= len(e.inline) {
		e.n = uint8(copy(e.inline[:], endpoints))
	} else {
		e.more = append([]string(nil), endpoints...)
	}
	for _, name := range endpoints {
		t.counts[scheduling.NameHash(name)]++
	}
	t.live++
}

// Done records that request id ended. For an id not started yet, it
// remembers (for the timeout) that the id is done, so that its start, when
// it arrives, counts nothing.
func (t *Tracker[K]) Done(id K) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	t.expire(now)
	i, ok := t.requests[id]
	switch {
	case !ok:
		t.entries[t.newEntry(id, now)].done = true
	case !t.entries[i].done:
		t.finish(&t.entries[i])
	}
}

// SetTimeout changes the timeout for every request from now on.
func (t *Tracker[K]) SetTimeout(timeout time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.timeout = timeout
}

// InFlight returns the in-flight count of an endpoint.
func (t *Tracker[K]) InFlight(endpoint string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.expire(t.now())
	return t.counts[scheduling.NameHash(endpoint)]
}

// Len returns the number of requests in flight.
func (t *Tracker[K]) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.expire(t.now())
	return t.live
}

// snapshot writes the in-flight count of eps[i] into dst[i] and returns dst.
func (t *Tracker[K]) snapshot(eps []*scheduling.Endpoint, dst []float64) []float64 {
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

// newEntry adds an entry for id in a free slot of the slab and returns
// the slot.
func (t *Tracker[K]) newEntry(id K, started time.Time) int32 {
	var i int32
	if n := len(t.free); n > 0 {
		i, t.free = t.free[n-1], t.free[:n-1]
	} else {
		i = int32(len(t.entries))
		t.entries = append(t.entries, entry[K]{})
	}
	t.entries[i] = entry[K]{id: id, started: started}
	t.requests[id] = i
	t.byAge.push(i)
	return i
}

// finish releases a request's endpoints; the entry stays, done, until it
// expires.
func (t *Tracker[K]) finish(e *entry[K]) {
	for _, name := range e.endpoints() {
		h := scheduling.NameHash(name)
		if n := t.counts[h] - 1; n > 0 {
			t.counts[h] = n
		} else {
			delete(t.counts, h)
		}
	}
	e.done = true
	t.live--
}

// expire drops the entries started more than the timeout ago, finishing
// those still in flight.
func (t *Tracker[K]) expire(now time.Time) {
	deadline := now.Add(-t.timeout)
	for len(t.byAge.idx) > 0 && t.entries[t.byAge.idx[0]].started.Before(deadline) {
		i := t.byAge.pop()
		e := &t.entries[i]
		if !e.done {
			t.finish(e)
		}
		delete(t.requests, e.id)
		*e = entry[K]{}
		t.free = append(t.free, i)
	}
}

// ageHeap is a binary min-heap of slab indexes by their entries' start
// times (typed, so that pushing allocates nothing).
type ageHeap[K comparable] struct {
	t   *Tracker[K]
	idx []int32
}

func (h *ageHeap[K]) less(i, j int) bool {
	return h.t.entries[h.idx[i]].started.Before(h.t.entries[h.idx[j]].started)
}

func (h *ageHeap[K]) push(x int32) {
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

func (h *ageHeap[K]) pop() int32 {
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
