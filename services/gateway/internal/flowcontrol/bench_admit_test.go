package flowcontrol

import (
	"context"
	"testing"
)

// BenchmarkAdmitRelease is the request path's cost of flow control when
// the pool has room: admit at once, then release, 4 flows.
func BenchmarkAdmitRelease(b *testing.B) {
	c := New(Config{Queueing: true}, NewSlots(0, nil))
	flows := []string{"a", "b", "c", "d"}
	i := 0
	for b.Loop() {
		if err := c.Acquire(context.Background(), Request{Flow: flows[i%4], Priority: i % 3}); err != nil {
			b.Fatal(err)
		}
		c.Release()
		i++
	}
}

// BenchmarkAdmitReleaseUsageLimit is the same with an EndpointPickerConfig's
// detector reading and a usage-limit policy's ceiling on every admission.
func BenchmarkAdmitReleaseUsageLimit(b *testing.B) {
	sat := NewPoolSaturation()
	sat.FailClosed = true
	names := map[string]bool{}
	for i := range 16 {
		names[string(rune('a'+i))] = true
	}
	sat.Retain(names)
	for name := range names {
		sat.Update(name, 1, 0.3)
	}
	c := New(Config{Queueing: true, QueueSheddable: true, Saturation: sat.Level, UsageLimit: staticCeiling(0.9)}, NewSlots(0, nil))
	i := 0
	for b.Loop() {
		if err := c.Acquire(context.Background(), Request{Priority: i % 3}); err != nil {
			b.Fatal(err)
		}
		c.Release()
		i++
	}
}

type staticCeiling float64

func (s staticCeiling) Ceilings(_ float64, _ []int, out []float64) {
	for i := range out {
		out[i] = float64(s)
	}
}

// BenchmarkAdmitLeaseEviction is the request path with in-flight
// eviction on: each admission a lease, the sheddable ones (a third)
// entering the evictable heap, 64 others in flight in it.
func BenchmarkAdmitLeaseEviction(b *testing.B) {
	c := New(Config{Queueing: true, QueueSheddable: true, Eviction: &Eviction{}}, NewSlots(0, nil))
	for range 64 {
		if _, err := c.Admit(context.Background(), Request{Priority: -1}); err != nil {
			b.Fatal(err)
		}
	}
	i := 0
	for b.Loop() {
		l, err := c.Admit(context.Background(), Request{Priority: i%3 - 1})
		if err != nil {
			b.Fatal(err)
		}
		l.Release(0, 0)
		i++
	}
}
