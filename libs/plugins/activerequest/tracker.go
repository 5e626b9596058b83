package activerequest

import (
	"sync"
	"time"

	"github.com/hermod/hermod/libs/scheduling"
)

// Tracker counts in-flight requests per endpoint, keyed by a request key K
// that must be unique per request (the scorer uses the scheduler's decision
// ids, not client-supplied request ids). A request is started with the
// endpoints it occupies and done once. Events may be redelivered, and
// arrive out of order (starts and completions travel on different streams):
// a second start or done of the same key changes nothing, a finished key is
// remembered until its timeout so a late redelivered start does not count it
// again, and a done that arrives before its start is remembered the same
// way so the start is never counted. A request not done within the timeout is dropped. Expiry is lazy, on
// the next call: every entry has the same lifetime, so a FIFO in start order
// finds them in O(1). It is safe for concurrent use.
type Tracker[K comparable] struct {
	mu       sync.Mutex
	timeout  time.Duration
	now      func() time.Time
	counts   map[uint64]int // by endpoint NameHash
	requests map[K]entry    // in flight and finished-but-remembered
	live     int
	queue    []queued[K]
	head     int
	seq      uint64
}

// entry is one request. Its endpoints are inline[:n], or more when a
// request occupies more than two (a disaggregated request with encode).
type entry struct {
	seq    uint64
	done   bool
	n      uint8
	inline [2]string
	more   []string
}

func (e *entry) endpoints() []string {
	if e.more != nil {
		return e.more
	}
	return e.inline[:e.n]
}

type queued[K comparable] struct {
	id      K
	seq     uint64
	started time.Time
}

// NewTracker returns a tracker dropping requests older than timeout.
func NewTracker[K comparable](timeout time.Duration, now func() time.Time) *Tracker[K] {
	if now == nil {
		now = time.Now
	}
	return &Tracker[K]{timeout: timeout, now: now, counts: map[uint64]int{}, requests: map[K]entry{}}
}

// Start records request id as in flight on endpoints, now.
func (t *Tracker[K]) Start(id K, endpoints []string) { t.StartAt(id, endpoints, t.now()) }

// StartAt records request id as in flight on endpoints since started. An id
// already known (in flight, or finished within the timeout) is left as it is.
func (t *Tracker[K]) StartAt(id K, endpoints []string, started time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.expire()
	if _, ok := t.requests[id]; ok {
		return
	}
	t.seq++
	e := entry{seq: t.seq}
	if len(endpoints) <= len(e.inline) {
		e.n = uint8(copy(e.inline[:], endpoints))
	} else {
		e.more = append([]string(nil), endpoints...)
	}
	for _, name := range endpoints {
		t.counts[scheduling.NameHash(name)]++
	}
	t.requests[id] = e
	t.live++
	t.queue = append(t.queue, queued[K]{id: id, seq: e.seq, started: started})
}

// Done records that request id ended. For an id not started yet, it
// remembers (for the timeout) that the id is done, so that its start, when
// it arrives, counts nothing.
func (t *Tracker[K]) Done(id K) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.expire()
	e, ok := t.requests[id]
	switch {
	case !ok:
		t.seq++
		t.requests[id] = entry{seq: t.seq, done: true}
		t.queue = append(t.queue, queued[K]{id: id, seq: t.seq, started: t.now()})
	case !e.done:
		t.finish(id, e)
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
	t.expire()
	return t.counts[scheduling.NameHash(endpoint)]
}

// Len returns the number of requests in flight.
func (t *Tracker[K]) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.expire()
	return t.live
}

// snapshot writes the in-flight count of eps[i] into dst[i] and returns dst.
func (t *Tracker[K]) snapshot(eps []*scheduling.Endpoint, dst []float64) []float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.expire()
	if len(t.counts) == 0 {
		clear(dst)
		return dst
	}
	for i, e := range eps {
		dst[i] = float64(t.counts[e.NameHash()])
	}
	return dst
}

// finish releases a request's endpoints; the entry stays, marked done,
// until expire forgets it.
func (t *Tracker[K]) finish(id K, e entry) {
	for _, name := range e.endpoints() {
		h := scheduling.NameHash(name)
		if n := t.counts[h] - 1; n > 0 {
			t.counts[h] = n
		} else {
			delete(t.counts, h)
		}
	}
	t.requests[id] = entry{seq: e.seq, done: true}
	t.live--
}

// expire drops requests started more than timeout ago (finishing them if
// they are still in flight) and forgets finished ones of that age.
func (t *Tracker[K]) expire() {
	deadline := t.now().Add(-t.timeout)
	for t.head < len(t.queue) {
		q := t.queue[t.head]
		if !q.started.Before(deadline) {
			break
		}
		if e, ok := t.requests[q.id]; ok && e.seq == q.seq {
			if !e.done {
				t.finish(q.id, e)
			}
			delete(t.requests, q.id)
		}
		t.queue[t.head] = queued[K]{}
		t.head++
	}
	// Reclaim the consumed prefix of the queue once it dominates.
	if t.head > 1024 && t.head*2 > len(t.queue) {
		n := 0
		for _, q := range t.queue[t.head:] {
			if e, ok := t.requests[q.id]; ok && e.seq == q.seq {
				t.queue[n] = q
				n++
			}
		}
		clear(t.queue[n:])
		t.queue = t.queue[:n]
		t.head = 0
	}
}
