package flowcontrol

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/hermod/hermod/libs/plugins/flowpolicy"
)

func programAware(int) Band { return Band{Fairness: FairProgramAware} }

// The program that has used the least goes first; among equals, the one
// waiting longest.
func TestProgramAwareServesTheLeastServedFirst(t *testing.T) {
	c := full(t, Config{Band: programAware})
	// "heavy" finished a request of 1000 prompt and 500 completion tokens
	c.mu.Lock()
	c.programs.admitted("heavy", time.Now())
	c.mu.Unlock()
	c.Finished(Request{Flow: "heavy"}, 1000, 500)
	order := admitOrder(t, c, []Request{{Flow: "heavy"}, {Flow: "heavy"}, {Flow: "light"}, {Flow: "new"}})
	// light and new have no service: they go first, the one waiting
	// longer (light) before the other; then heavy's requests
	if got := fmt.Sprint(order); got != "[0light 0new 0heavy 0heavy]" {
		t.Fatalf("admitted %s", got)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.programs.m["heavy"].service; s != 2000 {
		t.Errorf("attained service %v, want 1000 + 2 x 500", s)
	}
}

func TestProgramServiceDecaysWhileIdle(t *testing.T) {
	p, _ := flowpolicy.ParseProgramAware(nil, nil)
	p.LASHalfLifeSeconds = 10
	ps := newPrograms(p, nil)
	t0 := time.Unix(1000, 0)
	ps.admitted("a", t0)
	ps.finished("a", 100, 0, t0)
	ps.queue("a", t0.Add(10*time.Second)) // idle for one half-life
	if s := ps.m["a"].service; s != 50 {
		t.Fatalf("after a half-life idle: %v", s)
	}
	ps.unqueue("a", true, t0.Add(10*time.Second), t0.Add(20*time.Second))
	ps.finished("a", 0, 0, t0.Add(30*time.Second)) // in flight: no decay
	if s := ps.m["a"].service; s != 50 {
		t.Fatalf("decayed while in flight: %v", s)
	}

	// per dispatch: lasDecayFactor for every dispatch decided while idle
	q, _ := flowpolicy.ParseProgramAware(nil, nil)
	q.LASDecayFactor = 0.5
	ps = newPrograms(q, nil)
	ps.admitted("a", t0)
	ps.finished("a", 80, 0, t0)
	for range 3 {
		ps.pick([]string{"b"}, func(string) time.Time { return t0 }, t0)
	}
	ps.queue("a", t0)
	if s := ps.m["a"].service; s != 10 {
		t.Fatalf("after 3 dispatches at 0.5: %v, want 10", s)
	}
}

func TestIdleProgramsAreForgotten(t *testing.T) {
	p, _ := flowpolicy.ParseProgramAware(nil, nil)
	p.EvictionTTLSeconds, p.EvictionSweepSeconds = 60, 1
	ps := newPrograms(p, nil)
	t0 := time.Unix(1000, 0)
	ps.admitted("old", t0)
	ps.finished("old", 1, 1, t0)
	ps.admitted("busy", t0) // in flight: kept however long
	ps.admitted("recent", t0.Add(90*time.Second))
	ps.finished("recent", 1, 1, t0.Add(90*time.Second))
	if _, ok := ps.m["old"]; ok {
		t.Error("a program idle past the TTL is remembered")
	}
	if _, ok := ps.m["busy"]; !ok {
		t.Error("a program in flight was forgotten")
	}
	for i := range maxPrograms + 10 {
		flow := fmt.Sprint("p", i)
		ps.admitted(flow, t0.Add(91*time.Second))
		ps.finished(flow, 1, 0, t0.Add(91*time.Second))
	}
	if len(ps.m) > maxPrograms {
		t.Errorf("%d programs remembered, bound %d", len(ps.m), maxPrograms)
	}
	if _, ok := ps.m["busy"]; !ok {
		t.Error("the bound forgot a program in flight")
	}
}

func TestProgramMetricsAndFairnessIndex(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry(), "pool", nil)
	p, _ := flowpolicy.ParseProgramAware(nil, nil)
	p.EvictionTTLSeconds, p.EvictionSweepSeconds = 10, 1
	ps := newPrograms(p, m)
	t0 := time.Unix(1000, 0)
	ps.queue("a", t0)
	ps.unqueue("a", true, t0, t0.Add(40*time.Millisecond))
	ps.admitted("b", t0)
	ps.finished("a", 10, 5, t0.Add(time.Second))
	ps.finished("b", 1, 0, t0.Add(2*time.Second))
	if got := testutil.ToFloat64(m.serviceTokens.WithLabelValues("a")); got != 20 {
		t.Errorf("a's attained service %v", got)
	}
	if got := testutil.ToFloat64(m.waitMs.WithLabelValues("a")); got != 40 {
		t.Errorf("a's mean wait %v ms", got)
	}
	// waits 40 and 0 ms: (40)^2 / (2 x 1600) = 0.5
	if got := ps.fairnessIndex(); got != 0.5 {
		t.Errorf("Jain's index %v, want 0.5", got)
	}
	ps.admitted("c", t0.Add(30*time.Second))
	ps.finished("c", 1, 1, t0.Add(30*time.Second)) // sweeps a and b, idle past the TTL
	if n := testutil.CollectAndCount(m.serviceTokens); n != 1 {
		t.Errorf("%d attained-service series after the sweep, want c's alone", n)
	}
}
