package metrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// countingCollector reports how many times it was collected.
type countingCollector struct {
	desc  *prometheus.Desc
	calls int
}

func (c *countingCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }
func (c *countingCollector) Collect(ch chan<- prometheus.Metric) {
	c.calls++
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(c.calls))
}

func TestCachedCollectorServesWithinTTL(t *testing.T) {
	now := time.Unix(100, 0)
	inner := &countingCollector{desc: prometheus.NewDesc("calls_total", "collections", nil, nil)}
	c := newCachedCollector(inner, time.Second, func() time.Time { return now })
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	for range 3 {
		if got := testutil.ToFloat64(c); got != 1 {
			t.Fatalf("within the TTL: %v, want the first collection (1)", got)
		}
	}
	now = now.Add(time.Second)
	if got := testutil.ToFloat64(c); got != 2 {
		t.Fatalf("after the TTL: %v, want a new collection (2)", got)
	}
	if n, err := testutil.GatherAndCount(reg, "calls_total"); err != nil || n != 1 {
		t.Fatalf("gathered %d series (%v), want 1", n, err)
	}
	if inner.calls != 2 {
		t.Fatalf("inner collected %d times, want 2", inner.calls)
	}
}
