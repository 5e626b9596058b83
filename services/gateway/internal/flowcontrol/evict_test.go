package flowcontrol

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/hermod/hermod/libs/plugins/flowpolicy"
)

// admitted admits r at once (the pool has room) and fails the test
// otherwise; each admission a millisecond after the last, so that
// admission times order them.
func admitted(t *testing.T, c *Controller, r Request) *Lease {
	t.Helper()
	time.Sleep(time.Millisecond)
	l, err := c.Admit(context.Background(), r)
	if err != nil {
		t.Fatalf("admit %+v: %v", r, err)
	}
	return l
}

// waitingAdmit starts Admit of r, which waits in the queue; the lease or
// error arrives on the channel.
func waitingAdmit(t *testing.T, c *Controller, r Request, queued int) <-chan admitResult {
	t.Helper()
	ch := make(chan admitResult, 1)
	go func() {
		l, err := c.Admit(context.Background(), r)
		ch <- admitResult{l, err}
	}()
	waitQueued(t, c, queued)
	return ch
}

type admitResult struct {
	l   *Lease
	err error
}

func evicted(l *Lease) bool {
	select {
	case <-l.Context().Done():
		return l.Evicted()
	default:
		return false
	}
}

func waitEvicted(t *testing.T, l *Lease) {
	t.Helper()
	select {
	case <-l.Context().Done():
		if !errors.Is(context.Cause(l.Context()), ErrEvicted) {
			t.Fatalf("canceled with %v, want ErrEvicted", context.Cause(l.Context()))
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("request of priority %d not evicted", l.req.Priority)
	}
}

// The pool's capacity is taken by sheddable requests and a critical one
// arrives: the sheddable request of the lowest priority admitted last is
// evicted (its context canceled with ErrEvicted), and when it ends, the
// critical request takes its room. The others run on.
func TestEvictionFullCapacityEvictsTheCheapestSheddable(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg, "pool-e", nil)
	c := New(Config{Queueing: true, QueueSheddable: true, Eviction: &Eviction{}, Metrics: m}, NewSlots(4, nil))
	older5 := admitted(t, c, Request{Priority: -5})
	keep0 := admitted(t, c, Request{Priority: 0}) // not sheddable
	newer5 := admitted(t, c, Request{Priority: -5})
	newer1 := admitted(t, c, Request{Priority: -1})
	if n := c.Evictable(); n != 3 {
		t.Fatalf("%d evictable, want the 3 sheddable", n)
	}
	critical := waitingAdmit(t, c, Request{Priority: 100}, 1)
	waitEvicted(t, newer5)
	for name, l := range map[string]*Lease{"older -5": older5, "0": keep0, "-1": newer1} {
		if evicted(l) {
			t.Errorf("the %s request was evicted too", name)
		}
	}
	select {
	case a := <-critical:
		t.Fatalf("the critical request was admitted before the evicted one ended: %v", a.err)
	case <-time.After(20 * time.Millisecond):
	}
	newer5.Release(0, 0) // the proxy saw the cancellation and ended
	a := <-critical
	if a.err != nil {
		t.Fatal(a.err)
	}
	if evicted(a.l) || c.Evictable() != 2 {
		t.Errorf("after: critical evicted %v, %d evictable", evicted(a.l), c.Evictable())
	}
	if got := testutil.ToFloat64(m.issued.WithLabelValues("100", "pool-e")); got != 1 {
		t.Errorf("revocations issued %v", got)
	}
	if got := testutil.ToFloat64(m.revocations.WithLabelValues(revocationConfirmed, "pool-e")); got != 1 {
		t.Errorf("revocations confirmed %v", got)
	}
	if n := testutil.CollectAndCount(reg, "llm_d_epp_flow_control_revocation_confirmation_seconds"); n != 1 {
		t.Errorf("confirmation latency series %d", n)
	}
	for _, l := range []*Lease{older5, keep0, newer1, a.l, newer5} {
		l.Release(0, 0)
	}
	if c.cap.(*Slots).InUse() != 0 || c.running != 0 {
		t.Errorf("slots %d, running %d after every release (one released twice)", c.cap.(*Slots).InUse(), c.running)
	}
}

// Only a band above the victim's priority evicts: a sheddable request
// waiting for sheddable ones of its own priority waits; requests of
// priority 0 or more are never evicted, and the critical request waits
// for its TTL.
func TestEvictionNeedsAHigherBandAndASheddableVictim(t *testing.T) {
	c := New(Config{Queueing: true, QueueSheddable: true, Eviction: &Eviction{}}, NewSlots(2, nil))
	a := admitted(t, c, Request{Priority: -3})
	b := admitted(t, c, Request{Priority: -3})
	same := waitingAdmit(t, c, Request{Priority: -3, TTL: 30 * time.Millisecond}, 1)
	if r := <-same; !errors.Is(r.err, ErrTTL) {
		t.Fatalf("same priority: %v, want its TTL", r.err)
	}
	if evicted(a) || evicted(b) {
		t.Fatal("evicted for a request of the same priority")
	}
	a.Release(0, 0)
	b.Release(0, 0)

	x := admitted(t, c, Request{Priority: 0})
	y := admitted(t, c, Request{Priority: 1})
	if c.Evictable() != 0 {
		t.Fatalf("%d evictable of priority 0 and 1", c.Evictable())
	}
	critical := waitingAdmit(t, c, Request{Priority: 100, TTL: 30 * time.Millisecond}, 1)
	if r := <-critical; !errors.Is(r.err, ErrTTL) {
		t.Fatalf("critical: %v, want its TTL (nothing evictable)", r.err)
	}
	if evicted(x) || evicted(y) {
		t.Fatal("a request of priority >= 0 was evicted")
	}
	x.Release(0, 0)
	y.Release(0, 0)
}

// A decision waits until the requests evicted before ended and their
// grace passed: two critical requests behind a full pool evict one
// sheddable request each, one after the other, not two for the first; an
// evicted request that does not end holds the next decision back only
// until the timeout.
func TestEvictionIsPacedByTheEndOfTheEvicted(t *testing.T) {
	c := New(Config{Queueing: true, QueueSheddable: true, Eviction: &Eviction{Grace: 30 * time.Millisecond, Timeout: 300 * time.Millisecond}},
		NewSlots(3, nil))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx, 5*time.Millisecond) }()
	defer func() { cancel(); <-done }()
	s1 := admitted(t, c, Request{Priority: -1})
	s2 := admitted(t, c, Request{Priority: -1})
	s3 := admitted(t, c, Request{Priority: -1})
	first := waitingAdmit(t, c, Request{Priority: 10}, 1)
	waitEvicted(t, s3) // the newest
	second := waitingAdmit(t, c, Request{Priority: 10}, 2)
	time.Sleep(50 * time.Millisecond) // several dispatch passes
	if evicted(s2) || evicted(s1) {
		t.Fatal("a second eviction before the first evicted request ended")
	}
	start := time.Now()
	s3.Release(0, 0)
	r := <-first
	if r.err != nil {
		t.Fatal(r.err)
	}
	waitEvicted(t, s2)
	if d := time.Since(start); d < 30*time.Millisecond {
		t.Errorf("the next eviction %v after the end of the last, inside its grace", d)
	}
	// s2 never ends: after the timeout s1 goes for the third
	third := waitingAdmit(t, c, Request{Priority: 10}, 2)
	start = time.Now()
	waitEvicted(t, s1)
	if d := time.Since(start); d < 250*time.Millisecond {
		t.Errorf("evicted %v after the last eviction, before its timeout", d)
	}
	s1.Release(0, 0)
	s2.Release(0, 0)
	for _, ch := range []<-chan admitResult{second, third} {
		a := <-ch
		if a.err != nil {
			t.Fatal(a.err)
		}
		a.l.Release(0, 0)
	}
	r.l.Release(0, 0)
}

// By saturation: every waiting band at or above its ceiling, a decision
// evicts as many requests as the saturation's excess over the ceiling is
// worth (saturation / requests in flight each), at least one and
// MaxPerDecision at most; none while the pool has no endpoint.
func TestEvictionSizedByTheSaturationExcess(t *testing.T) {
	for _, tc := range []struct {
		name      string
		threshold float64
		max       int
		empty     bool
		want      int
	}{
		{"at the ceiling: one", 1, 0, false, 1},
		{"0.4 over, 0.25 each: two", 0.6, 0, false, 2},
		{"0.75 over: three, held to two", 0.25, 0, false, 2},
		{"0.75 over: three", 0.25, 5, false, 3},
		{"no endpoint: none", 1, 0, true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var sat atomic.Value
			sat.Store(0.0)
			limit, err := flowpolicy.ParseStatic([]byte(`{"threshold": `+strconv.FormatFloat(tc.threshold, 'g', -1, 64)+`}`), nil)
			if err != nil {
				t.Fatal(err)
			}
			c := New(Config{Queueing: true, QueueSheddable: true, Saturation: func() float64 { return sat.Load().(float64) },
				UsageLimit: limit, PoolEmpty: func() bool { return tc.empty }, Eviction: &Eviction{MaxPerDecision: tc.max}}, NewSlots(0, nil))
			var running []*Lease
			for range 4 {
				running = append(running, admitted(t, c, Request{Priority: -1}))
			}
			sat.Store(1.0)
			critical := waitingAdmit(t, c, Request{Priority: 5, TTL: 100 * time.Millisecond}, 1)
			time.Sleep(20 * time.Millisecond)
			got := 0
			for i, l := range running {
				if evicted(l) {
					got++
					if i < 4-tc.want {
						t.Errorf("request %d evicted: the newest go first", i)
					}
				}
			}
			if got != tc.want {
				t.Errorf("%d evicted, want %d", got, tc.want)
			}
			// the gauge does not move (a scraped reading lags): no more
			<-critical
			for _, l := range running {
				l.Release(0, 0)
			}
		})
	}
}

// Without eviction a lease is Acquire's slot: never canceled, released
// once.
func TestLeaseWithoutEviction(t *testing.T) {
	c := New(Config{Queueing: true}, NewSlots(1, nil))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l, err := c.Admit(ctx, Request{Priority: -1})
	if err != nil {
		t.Fatal(err)
	}
	if l.Context() != ctx || l.Evicted() || c.Evictable() != 0 {
		t.Fatalf("lease %+v", l)
	}
	l.Release(0, 0)
	l.Release(0, 0)
	if n := c.cap.(*Slots).InUse(); n != 0 {
		t.Fatalf("%d slots in use", n)
	}
	if _, err := c.Admit(ctx, Request{}); err != nil {
		t.Fatal(err)
	}
}
