package observe

import "time"

// maxWindow is the maximum of a gauge over a sliding time window.
type maxWindow struct {
	span time.Duration
	q    []sample
}

type sample struct {
	at time.Time
	v  float64
}

// add records v at t (samples arrive in time order).
func (w *maxWindow) add(t time.Time, v float64) {
	w.q = append(w.q, sample{t, v})
	i := 0
	for i < len(w.q)-1 && t.Sub(w.q[i].at) > w.span {
		i++
	}
	if i > 0 {
		w.q = append(w.q[:0], w.q[i:]...)
	}
}

// max returns the maximum of the samples of the window ending at now that
// are not older than since (the fleet's last change: samples taken before
// describe another fleet). The latest sample counts however old it is: a
// gauge holds its value until the next one.
func (w *maxWindow) max(now, since time.Time) float64 {
	if len(w.q) == 0 {
		return 0
	}
	m := w.q[len(w.q)-1].v
	for _, s := range w.q {
		if now.Sub(s.at) <= w.span && !s.at.Before(since) {
			m = max(m, s.v)
		}
	}
	return m
}

// counterWindow gives the increase of counters over a sliding window from
// samples thinned to one per step. A counter that goes down (a restarted
// engine) starts the window over.
type counterWindow struct {
	span, step time.Duration
	q          []counters
}

type counters struct {
	at time.Time
	v  [nCounters]float64
}

// The counters a replica's PodMetrics carry.
const (
	cPrompt = iota
	cGeneration
	cSuccess
	cPrefixQueries
	cPrefixHits
	nCounters
)

func (w *counterWindow) add(t time.Time, v [nCounters]float64) {
	if n := len(w.q); n > 0 {
		last := w.q[n-1]
		for i := range v {
			if v[i] < last.v[i] {
				w.q = w.q[:0] // reset: the engine restarted
				break
			}
		}
	}
	if n := len(w.q); n >= 2 && t.Sub(w.q[n-2].at) < w.step {
		w.q[n-1] = counters{t, v} // thin: replace the newest
	} else {
		w.q = append(w.q, counters{t, v})
	}
	i := 0
	for i < len(w.q)-2 && t.Sub(w.q[i+1].at) >= w.span {
		i++
	}
	if i > 0 {
		w.q = append(w.q[:0], w.q[i:]...)
	}
}

// increase returns each counter's increase over the window and the time
// it spans (0 with fewer than two samples).
func (w *counterWindow) increase() ([nCounters]float64, time.Duration) {
	var d [nCounters]float64
	if len(w.q) < 2 {
		return d, 0
	}
	first, last := w.q[0], w.q[len(w.q)-1]
	for i := range d {
		d[i] = last.v[i] - first.v[i]
	}
	return d, last.at.Sub(first.at)
}

// events is a sliding window of timestamped observations (completions).
type events[T any] struct {
	span time.Duration
	q    []timed[T]
}

type timed[T any] struct {
	at time.Time
	v  T
}

func (e *events[T]) add(t time.Time, v T) {
	e.q = append(e.q, timed[T]{t, v})
}

// within returns the observations of the window ending at now.
func (e *events[T]) within(now time.Time) []timed[T] {
	i := 0
	for i < len(e.q) && now.Sub(e.q[i].at) > e.span {
		i++
	}
	if i > 0 {
		e.q = append(e.q[:0], e.q[i:]...)
	}
	return e.q
}
