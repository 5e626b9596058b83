package bus

import "time"

// ackState is where an in-flight publish stands.
type ackState uint8

const (
	ackPending ackState = iota
	ackOK
	ackFailed
)

// inflight is a sent event waiting for its ack.
type inflight struct {
	ev    event
	id    uint64 // the publish id in the reply subject; consecutive along the window
	sent  time.Time
	state ackState
	dup   bool  // ackOK: the stream already held the event
	err   error // ackFailed: why
}

// ring is a fixed-capacity FIFO of in-flight publishes with consecutive ids.
type ring struct {
	buf         []inflight
	first, size int
}

func newRing(capacity int) ring { return ring{buf: make([]inflight, capacity)} }

func (r *ring) len() int { return r.size }

// push appends x; the caller keeps len below the capacity and ids
// consecutive.
func (r *ring) push(x inflight) {
	r.buf[(r.first+r.size)%len(r.buf)] = x
	r.size++
}

// head returns the oldest entry; the ring must not be empty.
func (r *ring) head() *inflight { return &r.buf[r.first] }

func (r *ring) pop() inflight {
	x := r.buf[r.first]
	r.buf[r.first] = inflight{}
	r.first = (r.first + 1) % len(r.buf)
	r.size--
	return x
}

// byID returns the entry with the given id, or nil if it is not in the
// ring.
func (r *ring) byID(id uint64) *inflight {
	if r.size == 0 {
		return nil
	}
	off := id - r.buf[r.first].id // wraps to a huge value for older ids
	if off >= uint64(r.size) {
		return nil
	}
	return &r.buf[(r.first+int(off))%len(r.buf)]
}

// each calls f with every entry, oldest first.
func (r *ring) each(f func(*inflight)) {
	for i := range r.size {
		f(&r.buf[(r.first+i)%len(r.buf)])
	}
}
