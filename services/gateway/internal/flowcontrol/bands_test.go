package flowcontrol

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

func TestGlobalStrictFairnessIsArrivalOrder(t *testing.T) {
	strict := func(int) Band { return Band{Fairness: FairGlobalStrict} }
	c := full(t, Config{Band: strict})
	order := admitOrder(t, c, []Request{
		{Flow: "a"}, {Flow: "a"}, {Flow: "b"}, {Priority: 2, Flow: "c"}, {Flow: "b"}, {Flow: "a"},
	})
	// one FIFO across the flows of a band; bands still by priority
	if got := fmt.Sprint(order); got != "[2c 0a 0a 0b 0b 0a]" {
		t.Fatalf("admitted %s", got)
	}
}

func TestBandBoundsInRequestsAndBytes(t *testing.T) {
	bands := func(p int) Band {
		if p < 0 {
			return Band{MaxRequests: 1}
		}
		return Band{MaxBytes: 100}
	}
	c := full(t, Config{Band: bands, QueueSheddable: true})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 3)
	go func() { done <- c.Acquire(ctx, Request{Priority: -1}) }()
	waitQueued(t, c, 1)
	if err := c.Acquire(ctx, Request{Priority: -1}); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("second request of a band of one: %v", err)
	}
	go func() { done <- c.Acquire(ctx, Request{Bytes: 60}) }()
	waitQueued(t, c, 2)
	if err := c.Acquire(ctx, Request{Bytes: 60}); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("120 bytes in a band of 100: %v", err)
	}
	go func() { done <- c.Acquire(ctx, Request{Bytes: 40}) }()
	waitQueued(t, c, 3)
	cancel()
	for range 3 {
		if err := <-done; err == nil {
			t.Error("a waiter of a saturated pool was dispatched")
		}
	}
	waitQueued(t, c, 0)
	c.mu.Lock()
	bandsLeft := len(c.bands)
	c.mu.Unlock()
	if bandsLeft != 0 {
		t.Fatalf("%d empty bands kept: a band that empties is forgotten", bandsLeft)
	}
}

func TestGlobalBoundsAndNoEndpoints(t *testing.T) {
	var empty atomic.Bool
	c := full(t, Config{MaxBytes: 10, PoolEmpty: empty.Load, DefaultTTL: 20 * time.Millisecond})
	if err := c.Acquire(context.Background(), Request{Bytes: 11}); !errors.Is(err, ErrQueueFull) || errors.Is(err, ErrNoEndpoints) {
		t.Fatalf("past the global byte bound: %v", err)
	}
	if err := c.Acquire(context.Background(), Request{}); !errors.Is(err, ErrTTL) || errors.Is(err, ErrNoEndpoints) {
		t.Fatalf("TTL with endpoints: %v", err)
	}
	empty.Store(true)
	if err := c.Acquire(context.Background(), Request{}); !errors.Is(err, ErrTTL) || !errors.Is(err, ErrNoEndpoints) {
		t.Fatalf("TTL with no endpoint: %v", err)
	}
	if err := c.Acquire(context.Background(), Request{Bytes: 11}); !errors.Is(err, ErrNoEndpoints) {
		t.Fatalf("queue full with no endpoint: %v", err)
	}
}

func TestNoTTLWaitsForTheClient(t *testing.T) {
	c := full(t, Config{NoTTL: true, DefaultTTL: time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := c.Acquire(ctx, Request{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("without a TTL the wait ends with the client: %v", err)
	}
}

func TestQueueSheddableQueuesInsteadOfShedding(t *testing.T) {
	c := full(t, Config{QueueSheddable: true})
	done := make(chan error, 1)
	go func() { done <- c.Acquire(context.Background(), Request{Priority: -5}) }()
	waitQueued(t, c, 1)
	c.Release()
	if err := <-done; err != nil {
		t.Fatalf("a sheddable request queued and was dispatched: %v", err)
	}
}

// ceilings holds priority p's band to ceiling[p].
type ceilings map[int]float64

func (c ceilings) Ceilings(_ float64, prios []int, out []float64) {
	for i, p := range prios {
		out[i] = c[p]
	}
}

func TestUsageLimitHoldsBandsBackBySaturation(t *testing.T) {
	var level atomic.Int64 // saturation in percent
	sat := func() float64 { return float64(level.Load()) / 100 }
	c := New(Config{Queueing: true, QueueSheddable: true, Saturation: sat, UsageLimit: ceilings{10: 0.9, 0: 0.5}}, NewSlots(0, nil))
	level.Store(40)
	if err := c.Acquire(context.Background(), Request{}); err != nil {
		t.Fatalf("under every ceiling: %v", err)
	}
	level.Store(70) // above band 0's ceiling, below band 10's
	low := make(chan error, 1)
	go func() { low <- c.Acquire(context.Background(), Request{Priority: 0}) }()
	waitQueued(t, c, 1)
	if err := c.Acquire(context.Background(), Request{Priority: 10}); err != nil {
		t.Fatalf("band 10 under its ceiling: %v", err)
	}
	if c.Dispatch() != 0 {
		t.Fatal("band 0 dispatched above its ceiling")
	}
	level.Store(45)
	if c.Dispatch() != 1 {
		t.Fatal("band 0 not dispatched below its ceiling")
	}
	if err := <-low; err != nil {
		t.Fatal(err)
	}
	// without a policy the ceiling is 1: a saturated pool holds everyone
	c2 := New(Config{Queueing: true, Saturation: func() float64 { return 1 }, DefaultTTL: 10 * time.Millisecond}, NewSlots(0, nil))
	if err := c2.Acquire(context.Background(), Request{Priority: 100}); !errors.Is(err, ErrTTL) {
		t.Fatalf("saturation 1 with the default ceiling: %v", err)
	}
}

func TestPoolSaturationFailClosedLevel(t *testing.T) {
	p := NewPoolSaturation()
	now := time.Unix(1000, 0)
	p.now = func() time.Time { return now }
	p.FailClosed = true
	if p.Level() != 1 || !p.Empty() {
		t.Fatalf("no endpoint: level %v, empty %v", p.Level(), p.Empty())
	}
	p.Retain(map[string]bool{"a": true, "b": true})
	p.Update("a", 0, 0.4) // load 0.5
	if got := p.Level(); got != 0.75 {
		t.Fatalf("a at 0.5, b without metrics at 1: level %v, want 0.75", got)
	}
	p.Update("b", 10, 0) // load 2, past saturated: counted as is
	if got := p.Level(); got != 1.25 {
		t.Fatalf("level %v, want 1.25", got)
	}
	now = now.Add(DefaultStaleness + time.Second)
	if got := p.Level(); got != 1 {
		t.Fatalf("stale metrics count as saturated: %v", got)
	}
	if p.Empty() || p.Endpoints() != 2 {
		t.Fatalf("endpoints %d", p.Endpoints())
	}
}

func TestSLODeadlineOrdering(t *testing.T) {
	c := full(t, Config{Band: func(int) Band { return Band{Fairness: FairGlobalStrict, Ordering: OrderSLODeadline} }})
	order := admitOrder(t, c, []Request{
		{Flow: "none1"}, {Flow: "slo5s-1", TTFTSLO: 5 * time.Second}, {Flow: "slo1s", TTFTSLO: time.Second},
		{Flow: "none2"}, {Flow: "slo5s-2", TTFTSLO: 5 * time.Second},
	})
	// earliest deadline first (arrival + SLO), requests without one last,
	// each kind by arrival
	if got := fmt.Sprint(order); got != "[0slo1s 0slo5s-1 0slo5s-2 0none1 0none2]" {
		t.Fatalf("admitted %s", got)
	}
}
