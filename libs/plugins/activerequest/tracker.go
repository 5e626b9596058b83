package activerequest

import (
	"strconv"
	"sync"
	"time"

	"github.com/hermod/hermod/libs/scheduling"
)

// Tracker counts in-flight requests per endpoint. A request is started with
// the endpoints it occupies and done once. Events may be redelivered: a
// second start or done of the same id changes nothing, and a finished id is
// remembered until its timeout so a late redelivered start does not count it
// again. A request not done within the timeout is dropped. Expiry is lazy, on
// the next call: every entry has the same lifetime, so a FIFO in start order
// finds them in O(1). It is safe for concurrent use.
type Tracker struct {
	mu       sync.Mutex
	timeout  time.Duration
	now      func() time.Time
	counts   map[string]int
	requests map[string]entry // in flight and finished-but-remembered
	live     int
	queue    []queued
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

type queued struct {
	id      string
	seq     uint64
	started time.Time
}

// NewTracker returns a tracker dropping requests older than timeout.
func NewTracker(timeout time.Duration, now func() time.Time) *Tracker {
	if now == nil {
		now = time.Now
	}
	return &Tracker{timeout: timeout, now: now, counts: map[string]int{}, requests: map[string]entry{}}
}

// Start records request id as in flight on endpoints, now.
func (t *Tracker) Start(id string, endpoints []string) { t.StartAt(id, endpoints, t.now()) }

// StartAt records request id as in flight on endpoints since started. An id
// already in flight is left as it is. An empty id gets a private one (it can
// then only end by timing out).
func (t *Tracker) StartAt(id string, endpoints []string, started time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.expire()
	t.seq++
	if id == "" {
		id = "\x00anonymous-" + strconv.FormatUint(t.seq, 10)
	}
	if _, ok := t.requests[id]; ok {
		return
	}
	e := entry{seq: t.seq}
	if len(endpoints) <= len(e.inline) {
		e.n = uint8(copy(e.inline[:], endpoints))
	} else {
		e.more = append([]string(nil), endpoints...)
	}
	for _, name := range endpoints {
		t.counts[name]++
	}
	t.requests[id] = e
	t.live++
	t.queue = append(t.queue, queued{id: id, seq: e.seq, started: started})
}

// Done records that request id ended. Unknown ids are ignored.
func (t *Tracker) Done(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.expire()
	if e, ok := t.requests[id]; ok && !e.done {
		t.finish(id, e)
	}
}

// InFlight returns the in-flight count of an endpoint.
func (t *Tracker) InFlight(endpoint string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.expire()
	return t.counts[endpoint]
}

// Len returns the number of requests in flight.
func (t *Tracker) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.expire()
	return t.live
}

// snapshot writes the in-flight count of eps[i] into dst[i] and returns dst.
func (t *Tracker) snapshot(eps []*scheduling.Endpoint, dst []float64) []float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.expire()
	if len(t.counts) == 0 {
		clear(dst)
		return dst
	}
	for i, e := range eps {
		dst[i] = float64(t.counts[e.Name])
	}
	return dst
}

// finish releases a request's endpoints; the entry stays, marked done,
// until expire forgets it.
func (t *Tracker) finish(id string, e entry) {
	for _, name := range e.endpoints() {
		if n := t.counts[name] - 1; n > 0 {
			t.counts[name] = n
		} else {
			delete(t.counts, name)
		}
	}
	t.requests[id] = entry{seq: e.seq, done: true}
	t.live--
}

// expire drops requests started more than timeout ago (finishing them if
// they are still in flight) and forgets finished ones of that age.
func (t *Tracker) expire() {
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
		t.queue[t.head] = queued{}
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
