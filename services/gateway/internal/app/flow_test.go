package app

import (
	"context"
	"testing"
	"time"
)

// The queue sizes are published once at the start, then once per burst
// of changes (coalesced), with models at zero left out.
func TestQueueReportCoalescesChanges(t *testing.T) {
	q := &queueReport{sizes: map[string]int64{}, changed: make(chan struct{}, 1)}
	got := make(chan map[string]int64, 16)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); q.run(ctx, func(m map[string]int64) { got <- m }) }()
	if m := <-got; len(m) != 0 {
		t.Fatalf("first report %v", m)
	}
	for i := 1; i <= 50; i++ {
		q.set("llama", i)
	}
	q.set("qwen", 2)
	q.set("qwen", 0)
	select {
	case m := <-got:
		if m["llama"] != 50 || len(m) != 1 {
			t.Fatalf("report %v, want llama at 50 alone", m)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("no report after the changes")
	}
	select {
	case m := <-got:
		t.Fatalf("a second report %v for one burst", m)
	case <-time.After(3 * queueReportMin):
	}
	cancel()
	<-done
}
