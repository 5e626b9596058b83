package pickerclient

import (
	"sync"
	"time"
)

// Ejection: a replica whose Pick attempt ran out of its AttemptTimeout is
// hung or overloaded; it is passed over for ejectBase, doubling with each
// ejection in a row up to ejectMax, until it answers a Pick again (as
// Envoy's outlier detection does for a host).
const (
	ejectBase = time.Second
	ejectMax  = 30 * time.Second
)

// ejections track the replicas passed over. Safe for concurrent use.
type ejections struct {
	base, max time.Duration
	now       func() time.Time

	mu    sync.Mutex
	until []time.Time // by replica: passed over until then
	inRow []int       // by replica: ejections since its last answer
}

func newEjections(replicas int) *ejections {
	return &ejections{base: ejectBase, max: ejectMax, now: time.Now, until: make([]time.Time, replicas), inRow: make([]int, replicas)}
}

// eject passes replica r over and returns for how long.
func (e *ejections) eject(r int) time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	d := e.base << min(e.inRow[r], 16)
	if d > e.max || d <= 0 {
		d = e.max
	}
	e.inRow[r]++
	e.until[r] = e.now().Add(d)
	return d
}

// answered ends replica r's ejections in a row.
func (e *ejections) answered(r int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.inRow[r], e.until[r] = 0, time.Time{}
}

// order returns the replicas to try from first on, in rotation: those not
// passed over, then those that are (the soonest back first), so that a
// Pick still tries every replica when all are ejected.
func (e *ejections) order(first int, dst []int) []int {
	n := len(e.until)
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.now()
	dst = dst[:0]
	for i := range n {
		if r := (first + i) % n; !now.Before(e.until[r]) {
			dst = append(dst, r)
		}
	}
	live := len(dst)
	for i := range n {
		if r := (first + i) % n; now.Before(e.until[r]) {
			dst = append(dst, r)
		}
	}
	ejected := dst[live:]
	for i := 1; i < len(ejected); i++ { // insertion sort: a handful of replicas
		for j := i; j > 0 && e.until[ejected[j]].Before(e.until[ejected[j-1]]); j-- {
			ejected[j], ejected[j-1] = ejected[j-1], ejected[j]
		}
	}
	return dst
}
