package retry

import (
	"context"
	"testing"
	"time"
)

func TestBackoff(t *testing.T) {
	b := Backoff(100*time.Millisecond, time.Second)
	within := func(d, want time.Duration) bool {
		return d >= want-want/5-time.Millisecond && d <= want+want/5+time.Millisecond
	}
	for _, want := range []time.Duration{100, 200, 400, 800, 1000, 1000} {
		want *= time.Millisecond
		if d := b.NextBackOff(); !within(d, want) {
			t.Errorf("delay %v, want %v +-20%%", d, want)
		}
	}
	b.Reset()
	if d := b.NextBackOff(); !within(d, 100*time.Millisecond) {
		t.Errorf("after Reset: %v", d)
	}
	if d := Nth(50*time.Millisecond, 5*time.Second, 3); !within(d, 200*time.Millisecond) {
		t.Errorf("Nth(3) = %v", d)
	}
	if d := Nth(50*time.Millisecond, 5*time.Second, 100); !within(d, 5*time.Second) {
		t.Errorf("Nth(100) = %v", d)
	}
}

func TestSleep(t *testing.T) {
	if !Sleep(context.Background(), time.Millisecond) {
		t.Error("a short sleep did not pass")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	if Sleep(ctx, time.Hour) || time.Since(start) > time.Second {
		t.Error("a sleep outlived its context")
	}
}
