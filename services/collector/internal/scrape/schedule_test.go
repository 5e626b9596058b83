package scrape

import (
	"testing"
	"time"
)

func TestJittered(t *testing.T) {
	const d = 100 * time.Millisecond
	lo, hi := d, d
	for range 10000 {
		j := jittered(d, 0.1)
		lo, hi = min(lo, j), max(hi, j)
	}
	if lo < 90*time.Millisecond || hi > 110*time.Millisecond {
		t.Errorf("jittered in [%v, %v], want within ±10%%", lo, hi)
	}
	if lo > 92*time.Millisecond || hi < 108*time.Millisecond {
		t.Errorf("jittered in [%v, %v]: does not use the range", lo, hi)
	}
	if j := jittered(d, 0); j != d {
		t.Errorf("no jitter: %v", j)
	}
}

func TestPhase(t *testing.T) {
	const d = 50 * time.Millisecond
	for range 1000 {
		if p := phase(d); p < 0 || p >= d {
			t.Fatalf("phase %v outside [0, %v)", p, d)
		}
	}
}

func TestTickerCountsSkippedTicks(t *testing.T) {
	t0 := time.Unix(1000, 0)
	tk := &ticker{interval: 10 * time.Millisecond, next: t0}
	tests := []struct {
		done    time.Duration // when the scrape at the tick ends, after it
		skipped int
		wait    time.Duration
	}{
		{3 * time.Millisecond, 0, 7 * time.Millisecond},
		{10 * time.Millisecond, 1, 10 * time.Millisecond}, // ends on the next tick: skipped
		{35 * time.Millisecond, 3, 5 * time.Millisecond},
	}
	for i, tc := range tests {
		at := tk.next
		now := at.Add(tc.done)
		if got := tk.advance(now); got != tc.skipped {
			t.Errorf("scrape %d: skipped %d, want %d", i, got, tc.skipped)
		}
		if w := tk.wait(now); w != tc.wait {
			t.Errorf("scrape %d: wait %v, want %v", i, w, tc.wait)
		}
	}
}
