package flowcontrol

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// queued starts Acquire for each request in order (each waiting in the
// queue before the next starts) and returns the order they are admitted
// in as the slot frees up one at a time.
func admitOrder(t *testing.T, c *Controller, reqs []Request) []string {
	t.Helper()
	var mu sync.Mutex
	var order []string
	var wg sync.WaitGroup
	for i, r := range reqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.Acquire(context.Background(), r); err != nil {
				t.Errorf("request %d: %v", i, err)
				return
			}
			mu.Lock()
			order = append(order, fmt.Sprintf("%d%s", r.Priority, r.Flow))
			mu.Unlock()
			c.Release()
		}()
		waitQueued(t, c, i+1)
	}
	c.Release() // the slot the test held
	wg.Wait()
	return order
}

func waitQueued(t *testing.T, c *Controller, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for c.Queued() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d queued, want %d", c.Queued(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// full holds the only slot.
func full(t *testing.T, cfg Config) *Controller {
	t.Helper()
	cfg.Queueing = true
	c := New(cfg, NewSlots(1, nil))
	if err := c.Acquire(context.Background(), Request{}); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestStrictPriorityAndFairFlows(t *testing.T) {
	c := full(t, Config{})
	order := admitOrder(t, c, []Request{
		{Priority: 0, Flow: "a"}, {Priority: 5, Flow: "x"}, {Priority: 1, Flow: "a"}, {Priority: 5, Flow: "x"},
		{Priority: 5, Flow: "y"}, {Priority: 0, Flow: "b"}, {Priority: 0, Flow: "a"},
	})
	// band 5 first, its flows x and y taking turns (x is FIFO), then 1,
	// then 0 with a, b, a
	if got := fmt.Sprint(order); got != "[5x 5y 5x 1a 0a 0b 0a]" {
		t.Fatalf("admitted %s", got)
	}
}

func TestWeightedSharesKeepLowBandsGoing(t *testing.T) {
	c := full(t, Config{Shares: map[int]float64{0: 0.3}})
	var reqs []Request
	for i := range 100 {
		reqs = append(reqs, Request{Priority: 10, Flow: fmt.Sprint("h", i%3)}, Request{Priority: 0, Flow: "low"})
	}
	order := admitOrder(t, c, reqs)
	low := 0
	for _, o := range order[:100] { // while both bands are full
		if o == "0low" {
			low++
		}
	}
	if low < 27 || low > 33 {
		t.Fatalf("the low band got %d of the first 100 dispatches, want 30 (share 0.3) within 10%%", low)
	}
}

func TestTTLAndDisconnectLeaveTheQueue(t *testing.T) {
	c := full(t, Config{DefaultTTL: 30 * time.Millisecond})
	if err := c.Acquire(context.Background(), Request{}); !errors.Is(err, ErrTTL) {
		t.Fatalf("waited past the TTL: %v", err)
	}
	if err := c.Acquire(context.Background(), Request{TTL: 10 * time.Millisecond}); !errors.Is(err, ErrTTL) {
		t.Fatalf("per-request TTL: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	gone := make(chan error, 1)
	go func() { gone <- c.Acquire(ctx, Request{TTL: time.Minute, Flow: "left"}) }()
	waitQueued(t, c, 1)
	stays := make(chan error, 1)
	go func() { stays <- c.Acquire(context.Background(), Request{TTL: time.Minute, Flow: "stays"}) }()
	waitQueued(t, c, 2)
	cancel()
	if err := <-gone; !errors.Is(err, context.Canceled) {
		t.Fatalf("a client that left: %v", err)
	}
	waitQueued(t, c, 1)
	// the slot goes to the one still waiting
	c.Release()
	if err := <-stays; err != nil {
		t.Fatal(err)
	}
	c.Release()
	if c.Queued() != 0 || c.cap.(*Slots).InUse() != 0 {
		t.Fatalf("queued %d, slots in use %d", c.Queued(), c.cap.(*Slots).InUse())
	}
}

func TestShedAndRefuseAtOnce(t *testing.T) {
	sizes := map[string]int{}
	var mu sync.Mutex
	c := New(Config{}, NewSlots(1, nil))
	if err := c.Acquire(context.Background(), Request{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Acquire(context.Background(), Request{Priority: -1}); !errors.Is(err, ErrShed) {
		t.Fatalf("sheddable: %v", err)
	}
	if err := c.Acquire(context.Background(), Request{}); !errors.Is(err, ErrSaturated) {
		t.Fatalf("queueing off: %v", err)
	}
	q := full(t, Config{MaxQueued: 1, Observe: func(m string, n int) { mu.Lock(); sizes[m] = n; mu.Unlock() }})
	go func() { _ = q.Acquire(context.Background(), Request{Model: "m", TTL: 50 * time.Millisecond}) }()
	waitQueued(t, q, 1)
	mu.Lock()
	if sizes["m"] != 1 {
		t.Fatalf("queue size per model %v", sizes)
	}
	mu.Unlock()
	if err := q.Acquire(context.Background(), Request{}); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("queue full: %v", err)
	}
	// the pool's saturation gates admission too
	sat := true
	s := New(Config{}, NewSlots(0, func() bool { return sat }))
	if err := s.Acquire(context.Background(), Request{}); !errors.Is(err, ErrSaturated) {
		t.Fatalf("saturated pool: %v", err)
	}
	sat = false
	if err := s.Acquire(context.Background(), Request{}); err != nil {
		t.Fatalf("room again: %v", err)
	}
	waitQueued(t, q, 0) // the waiter's TTL passes
}

func TestRunDispatchesOnKick(t *testing.T) {
	c := full(t, Config{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx, time.Hour) }()
	admitted := make(chan error, 1)
	go func() { admitted <- c.Acquire(context.Background(), Request{TTL: time.Minute}) }()
	waitQueued(t, c, 1)
	c.cap.Release() // capacity freed behind the controller's back: a Kick finds it
	c.Kick()
	if err := <-admitted; err != nil {
		t.Fatal(err)
	}
	cancel()
	<-done
}

// BenchmarkShed: how long a sheddable request takes to be refused on a
// saturated pool with a queue.
func BenchmarkShed(b *testing.B) {
	c := New(Config{Queueing: true}, NewSlots(1, nil))
	_ = c.Acquire(context.Background(), Request{})
	var lat []time.Duration
	for b.Loop() {
		start := time.Now()
		if err := c.Acquire(context.Background(), Request{Priority: -1}); !errors.Is(err, ErrShed) {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	max := time.Duration(0)
	for _, d := range lat {
		max = maxDur(max, d)
	}
	b.ReportMetric(float64(max.Nanoseconds()), "max-ns")
}

func maxDur(a, b time.Duration) time.Duration {
	if a > b {
		return a
	}
	return b
}
