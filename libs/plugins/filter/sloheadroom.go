package filter

import (
	"context"
	"encoding/json"

	"github.com/hermod/hermod/libs/plugins/predictedlatency"
	"github.com/hermod/hermod/libs/scheduling"
)

// SLOHeadroomTierType is the llm-d router's slo-headroom-tier-filter: the
// candidates split into those predicted to meet both SLOs (headrooms >= 0)
// and the rest (endpoints without a prediction among them); with both
// tiers it keeps the first, or with probability epsilonExploreNeg the
// second (so that an endpoint recovering from overload is tried again);
// with one, that one; without predictions, every candidate.
const SLOHeadroomTierType = "slo-headroom-tier-filter"

func init() {
	scheduling.Register(scheduling.Registration{Type: SLOHeadroomTierType, New: newSLOHeadroomTier})
}

// SLOHeadroomTierParams are slo-headroom-tier-filter's parameters.
type SLOHeadroomTierParams struct {
	EpsilonExploreNeg float64 `json:"epsilonExploreNeg"`
}

// SLOHeadroomTier is slo-headroom-tier-filter.
type SLOHeadroomTier struct {
	scheduling.Named
	params    SLOHeadroomTierParams
	predictor scheduling.LatencyPredictor
}

func newSLOHeadroomTier(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
	p := SLOHeadroomTierParams{EpsilonExploreNeg: 0.01}
	if err := scheduling.DecodeParameters(raw, &p, h); err != nil {
		return nil, err
	}
	if !(p.EpsilonExploreNeg >= 0 && p.EpsilonExploreNeg <= 1) {
		return nil, scheduling.ParamErrorf("epsilonExploreNeg", "must be in [0, 1] (got %v)", p.EpsilonExploreNeg)
	}
	lp, err := predictedlatency.Source(h)
	if err != nil {
		return nil, err
	}
	return &SLOHeadroomTier{Named: scheduling.Named{Type: SLOHeadroomTierType, Name: name}, params: p, predictor: lp}, nil
}

// Parameters implements scheduling.ParameterReporter.
func (f *SLOHeadroomTier) Parameters() any { return f.params }

// Filter implements scheduling.Filter.
func (f *SLOHeadroomTier) Filter(ctx context.Context, cs *scheduling.CycleState, req *scheduling.Request, in, dst []*scheduling.Endpoint) []*scheduling.Endpoint {
	preds := f.predictor.PredictLatency(ctx, cs, req, in)
	positive := func(e *scheduling.Endpoint) (bool, bool) {
		pr, ok := preds.Get(e.Name)
		if !ok {
			return false, false
		}
		t, d := pr.Headrooms()
		return t >= 0 && d >= 0, true
	}
	pos, neg, known := 0, 0, false
	for _, e := range in {
		p, ok := positive(e)
		known = known || ok
		if p {
			pos++
		} else {
			neg++
		}
	}
	if !known || pos == 0 || neg == 0 {
		return append(dst, in...)
	}
	keepPositive := !(f.params.EpsilonExploreNeg > 0 && cs.Rand().Float64() < f.params.EpsilonExploreNeg)
	for _, e := range in {
		if p, _ := positive(e); p == keepPositive {
			dst = append(dst, e)
		}
	}
	return dst
}
