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
