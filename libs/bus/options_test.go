package bus

import (
	"testing"
	"time"
)

// The backoff itself is libs/retry's (tested there); the options keep
// their bounds and ignore invalid values.
func TestBackoffOptions(t *testing.T) {
	o := newOptions([]Option{WithBackoff(100*time.Millisecond, time.Second)})
	if o.minBackoff != 100*time.Millisecond || o.maxBackoff != time.Second {
		t.Fatalf("options %+v", o)
	}
	if d := o.nthBackoff(50); d < 800*time.Millisecond || d > 1200*time.Millisecond {
		t.Errorf("nthBackoff(50) = %s, want the 1s bound +-20%%", d)
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
