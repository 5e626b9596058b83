package bench

import (
	"context"
	"fmt"

	"github.com/hermod/hermod/tools/devstack/stackstate"
)

// errorMetric is predicted-latency-scorer's histogram of its relative
// prediction errors, by kind (ttft, tpot; e2e for unstreamed requests).
const errorMetric = "hermod_picker_latency_prediction_error_ratio"

// predictionKinds are the kinds of errorMetric.
var predictionKinds = []string{"ttft", "tpot", "e2e"}

// PredictionError is how far predicted-latency-scorer's predictions were
// from what the requests of a run showed: the median and p90 of
// |predicted - observed| / observed (interpolated within the
// histogram's buckets), over the run's workload only (not its warm-up).
type PredictionError struct {
	Count int64   `json:"count"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
}

// predictionSnapshot is the pickers' error histograms at one moment, by
// kind, merged over the pickers.
type predictionSnapshot map[string]map[float64]float64

func scrapePredictionErrors(ctx context.Context, pickers []stackstate.Service) (predictionSnapshot, error) {
	snap := predictionSnapshot{}
	for _, kind := range predictionKinds {
		merged := map[float64]float64{}
		for _, p := range pickers {
			bs, err := scrapeBuckets(ctx, "http://"+p.Ops+"/metrics", errorMetric, fmt.Sprintf("kind=%q", kind))
			if err != nil {
				return nil, fmt.Errorf("prediction errors of %s: %w", p.Name, err)
			}
			for _, b := range bs {
				merged[b.le] += b.count
			}
		}
		snap[kind] = merged
	}
	return snap, nil
}

// since returns the errors observed between before and s, by kind (kinds
// with none are left out).
func (s predictionSnapshot) since(before predictionSnapshot) map[string]*PredictionError {
	out := map[string]*PredictionError{}
	for kind, now := range s {
		var bs []bucket
		for le, c := range now {
			bs = append(bs, bucket{le, c - before[kind][le]})
		}
		sortBuckets(bs)
		if len(bs) == 0 || bs[len(bs)-1].count <= 0 {
			continue
		}
		out[kind] = &PredictionError{Count: int64(bs[len(bs)-1].count), P50: quantile(bs, 0.5), P90: quantile(bs, 0.9)}
	}
	return out
}
