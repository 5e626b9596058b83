// Package retry is how Hermod waits between attempts: exponential backoff
// with jitter (github.com/cenkalti/backoff), and a sleep that ends with
// its context.
package retry

import (
	"context"
	"time"

	"github.com/cenkalti/backoff/v5"
)

// Jitter is the randomization of every delay: +-20%.
const Jitter = 0.2

// Backoff returns delays that start at minDelay and double up to maxDelay,
// each +-20%: NextBackOff gives the next, Reset starts over (after a
// success).
func Backoff(minDelay, maxDelay time.Duration) *backoff.ExponentialBackOff {
	b := &backoff.ExponentialBackOff{
		InitialInterval:     minDelay,
		RandomizationFactor: Jitter,
		Multiplier:          2,
		MaxInterval:         maxDelay,
	}
	b.Reset()
	return b
}

// Nth returns the delay before the n-th retry (n >= 1) of such a backoff,
// for callers that get an attempt count instead of keeping state.
func Nth(minDelay, maxDelay time.Duration, n int) time.Duration {
	b := Backoff(minDelay, maxDelay)
	d := b.NextBackOff()
	for i := 1; i < n && d < maxDelay; i++ {
		d = b.NextBackOff()
	}
	return d
}

// Sleep waits d, or until ctx ends; it says whether d passed.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
