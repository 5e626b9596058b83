package bench

import (
	"math"
	"strings"
	"testing"
)

func TestParseBucketsAndQuantiles(t *testing.T) {
	text := `# HELP hermod_picker_projection_decision_lag_seconds x
# TYPE hermod_picker_projection_decision_lag_seconds histogram
hermod_picker_projection_decision_lag_seconds_bucket{le="0.001"} 50
hermod_picker_projection_decision_lag_seconds_bucket{le="0.01"} 90
hermod_picker_projection_decision_lag_seconds_bucket{le="0.1"} 100
hermod_picker_projection_decision_lag_seconds_bucket{le="+Inf"} 100
hermod_picker_projection_decision_lag_seconds_sum 0.5
hermod_picker_projection_decision_lag_seconds_count 100
other_bucket{le="1"} 7
`
	bs, err := parseBuckets(strings.NewReader(text), lagMetric, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(bs) != 4 || !math.IsInf(bs[3].le, 1) || bs[1].count != 90 {
		t.Fatalf("buckets = %+v", bs)
	}
	for _, c := range []struct{ q, want float64 }{
		{0.5, 0.001},   // the whole first bucket
		{0.25, 0.0005}, // half of it
		{0.9, 0.01},
		{0.95, 0.055}, // half way through (0.01, 0.1]
	} {
		if got := quantile(bs, c.q); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("quantile(%v) = %v, want %v", c.q, got, c.want)
		}
	}
	if _, err := parseBuckets(strings.NewReader(lagMetric+`_bucket{le="x"} 1`), lagMetric, ""); err == nil {
		t.Error("a malformed bound parsed")
	}
}
