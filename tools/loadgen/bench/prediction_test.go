package bench

import (
	"math"
	"strconv"
	"strings"
	"testing"
)

// The errors of a run are the histogram's growth over the run, read from
// the labelled series of each kind.
func TestPredictionErrorsSince(t *testing.T) {
	text := func(counts ...float64) string {
		var b strings.Builder
		for i, le := range []string{"0.05", "0.1", "0.2", "+Inf"} {
			b.WriteString(errorMetric + `_bucket{kind="ttft",le="` + le + `"} ` + strconv.FormatFloat(counts[i], 'g', -1, 64) + "\n")
			b.WriteString(errorMetric + `_bucket{kind="tpot",le="` + le + `"} 0` + "\n")
		}
		return b.String()
	}
	snap := func(s string) predictionSnapshot {
		out := predictionSnapshot{}
		for _, kind := range predictionKinds {
			bs, err := parseBuckets(strings.NewReader(s), errorMetric, `kind="`+kind+`"`)
			if err != nil {
				t.Fatal(err)
			}
			m := map[float64]float64{}
			for _, b := range bs {
				m[b.le] += b.count
			}
			out[kind] = m
		}
		return out
	}
	// the warm-up: 10 requests, all far off; then 20 more, within 5% to 10%
	before := snap(text(0, 0, 0, 10))
	after := snap(text(0, 20, 20, 30))
	got := after.since(before)
	pe := got["ttft"]
	if pe == nil || pe.Count != 20 || math.Abs(pe.P50-0.075) > 1e-9 {
		t.Fatalf("ttft errors %+v, want 20 requests with a median of 7.5%%", pe)
	}
	if got["tpot"] != nil || got["e2e"] != nil {
		t.Fatalf("kinds without requests reported: %v", got)
	}
}
