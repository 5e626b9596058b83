package telemetry

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// Each constructor makes the metric its name, help, labels and buckets say.
func TestMetricConstructors(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := NewCounter("t_total", "A counter.")
	cv := NewCounterVec("t_by_total", "A counter vector.", "a", "b")
	g := NewGauge("t_gauge", "A gauge.")
	gv := NewGaugeVec("t_gauges", "A gauge vector.", "a")
	h := NewHistogram("t_seconds", "A histogram.", []float64{1, 2})
	hv := NewHistogramVec("t_by_seconds", "A histogram vector.", nil, "a")
	reg.MustRegister(c, cv, g, gv, h, hv)
	c.Inc()
	cv.WithLabelValues("x", "y").Add(2)
	g.Set(3)
	gv.WithLabelValues("x").Set(4)
	h.Observe(1.5)
	hv.WithLabelValues("x").Observe(0.2)
	want := `
# HELP t_by_total A counter vector.
# TYPE t_by_total counter
t_by_total{a="x",b="y"} 2
# HELP t_gauge A gauge.
# TYPE t_gauge gauge
t_gauge 3
# HELP t_seconds A histogram.
# TYPE t_seconds histogram
t_seconds_bucket{le="1"} 0
t_seconds_bucket{le="2"} 1
t_seconds_bucket{le="+Inf"} 1
t_seconds_sum 1.5
t_seconds_count 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "t_by_total", "t_gauge", "t_seconds"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(hv); n != 1 {
		t.Errorf("histogram vector series = %d, want 1", n)
	}
	if got := testutil.ToFloat64(gv.WithLabelValues("x")) + testutil.ToFloat64(c); got != 5 {
		t.Errorf("gauge vector + counter = %v, want 5", got)
	}
}
