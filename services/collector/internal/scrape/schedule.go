package scrape

import (
	"math/rand/v2"
	"time"
)

// phase returns a random offset in [0, interval): the first tick of a loop.
func phase(interval time.Duration) time.Duration {
	return rand.N(interval)
}

// jittered returns interval varied at random by up to ±frac of it.
func jittered(interval time.Duration, frac float64) time.Duration {
	if frac <= 0 {
		return interval
	}
	return time.Duration(float64(interval) * (1 + frac*(2*rand.Float64()-1)))
}

// ticker is a loop's schedule: ticks an interval (jittered) apart, counted
// from the first, so the schedule does not drift with the scrape times.
type ticker struct {
	interval time.Duration
	jitter   float64
	next     time.Time
}

func newTicker(now time.Time, interval time.Duration, jitter float64) *ticker {
	return &ticker{interval: interval, jitter: jitter, next: now.Add(phase(interval))}
}

// advance moves to the first tick after now and returns how many ticks it
// passed on the way: those that came while the loop was busy.
func (t *ticker) advance(now time.Time) (skipped int) {
	t.next = t.next.Add(jittered(t.interval, t.jitter))
	for !t.next.After(now) {
		t.next = t.next.Add(jittered(t.interval, t.jitter))
		skipped++
	}
	return skipped
}

// wait returns the time until the next tick.
func (t *ticker) wait(now time.Time) time.Duration {
	return t.next.Sub(now)
}
