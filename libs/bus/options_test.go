package bus

import (
	"testing"
	"time"
)

func TestBackoff(t *testing.T) {
	o := newOptions([]Option{WithBackoff(100*time.Millisecond, time.Second)})
	b := o.backoff()
	within := func(d, step time.Duration) bool { return d >= step*8/10 && d <= step*12/10 }
	for _, step := range []time.Duration{100, 200, 400, 800, 1000, 1000} {
		step *= time.Millisecond
		if d := b.NextBackOff(); !within(d, step) {
			t.Fatalf("delay %s, want %s +-20%%", d, step)
		}
	}
	b.Reset()
	if d := b.NextBackOff(); !within(d, 100*time.Millisecond) {
		t.Fatalf("after reset: %s", d)
	}
	for n, step := range map[int]time.Duration{1: 100, 2: 200, 4: 800, 5: 1000, 50: 1000} {
		if d := o.nthBackoff(n); !within(d, step*time.Millisecond) {
			t.Errorf("nthBackoff(%d) = %s, want %dms +-20%%", n, d, step)
		}
	}
	// Invalid values are ignored.
	o = newOptions([]Option{WithBackoff(time.Second, time.Millisecond), WithQueueSize(0), WithMaxPending(-1)})
	if o.minBackoff != DefaultMinBackoff || o.queueSize != DefaultQueueSize || o.maxPending != DefaultMaxPending {
		t.Fatalf("options %+v", o)
	}
}

func TestLogLimiter(t *testing.T) {
	l := logLimiter{every: time.Hour}
	if ok, n := l.allow(); !ok || n != 0 {
		t.Fatalf("first: %v %d", ok, n)
	}
	for range 3 {
		if ok, _ := l.allow(); ok {
			t.Fatal("let through within the interval")
		}
	}
	l.last = time.Now().Add(-2 * time.Hour)
	if ok, n := l.allow(); !ok || n != 3 {
		t.Fatalf("after the interval: %v, %d suppressed, want 3", ok, n)
	}
}
