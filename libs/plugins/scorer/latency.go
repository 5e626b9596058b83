package scorer

import (
	"context"
	"encoding/json"
	"math"

	"github.com/hermod/hermod/libs/plugins/predictedlatency"
	"github.com/hermod/hermod/libs/scheduling"
)

// LatencyType is the llm-d router's latency-scorer: endpoints scored by
// their predicted latency headroom (SLO minus prediction, from
// predicted-latency-producer).
//
//   - With some endpoints meeting both SLOs (headrooms >= 0) only they
//     score; the others get 0.
//   - With none, the idle ones (nothing in flight) score alone if any;
//     else only the least severe group: TPOT missed only, then TTFT
//     missed only, then both.
//   - Headrooms are normalized over the endpoints scored and blended,
//     ttftWeight x TTFT + tpotWeight x TPOT (a dimension whose headrooms
//     are all equal gives its weight to the other). Strategy least prefers
//     the headroom closest to the SLO (bin packing), most the largest; a
//     missed SLO is always scored by least (closest to being met).
//   - Without predictions: compositeKVWeight x (1 - KV use) +
//     compositeQueueWeight x (1 - queue / longest queue) +
//     compositePrefixWeight x prefix share, over the weights' sum.
const LatencyType = "latency-scorer"

// Headroom selection strategies.
const (
	HeadroomLeast = "least"
	HeadroomMost  = "most"
)

func init() {
	scheduling.Register(scheduling.Registration{Type: LatencyType, New: newLatency})
}

// LatencyParams are latency-scorer's parameters.
type LatencyParams struct {
	TTFTWeight                float64 `json:"ttftWeight"`
	TPOTWeight                float64 `json:"tpotWeight"`
	HeadroomSelectionStrategy string  `json:"headroomSelectionStrategy"`
	CompositeKVWeight         float64 `json:"compositeKVWeight"`
	CompositeQueueWeight      float64 `json:"compositeQueueWeight"`
	CompositePrefixWeight     float64 `json:"compositePrefixWeight"`
}

// Latency is latency-scorer.
type Latency struct {
	scheduling.Named
	params    LatencyParams
	predictor scheduling.LatencyPredictor
	prefix    scheduling.PrefixMatcher
}

func newLatency(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
	p := LatencyParams{TTFTWeight: 0.8, TPOTWeight: 0.2, HeadroomSelectionStrategy: HeadroomLeast,
		CompositeKVWeight: 1, CompositeQueueWeight: 1, CompositePrefixWeight: 1}
	if err := scheduling.DecodeParameters(raw, &p, h); err != nil {
		return nil, err
	}
	for field, v := range map[string]float64{"ttftWeight": p.TTFTWeight, "tpotWeight": p.TPOTWeight, "compositeKVWeight": p.CompositeKVWeight,
		"compositeQueueWeight": p.CompositeQueueWeight, "compositePrefixWeight": p.CompositePrefixWeight} {
		if !(v >= 0) || math.IsInf(v, 0) {
			return nil, scheduling.ParamErrorf(field, "must be a non-negative number (got %v)", v)
		}
	}
	if p.HeadroomSelectionStrategy != HeadroomLeast && p.HeadroomSelectionStrategy != HeadroomMost {
		return nil, scheduling.ParamErrorf("headroomSelectionStrategy", "%q is not %s or %s", p.HeadroomSelectionStrategy, HeadroomLeast, HeadroomMost)
	}
	lp, err := predictedlatency.Source(h)
	if err != nil {
		return nil, err
	}
	m, err := scheduling.PrefixMatcherFor(h, "")
	if err != nil {
		return nil, err
	}
	return &Latency{Named: scheduling.Named{Type: LatencyType, Name: name}, params: p, predictor: lp, prefix: m}, nil
}

// Parameters implements scheduling.ParameterReporter.
func (s *Latency) Parameters() any { return s.params }

// headroom is an endpoint's headrooms in seconds.
type headroom struct {
	ttft, tpot float64
	inFlight   int
	ok         bool
}

// Score implements scheduling.Scorer.
func (s *Latency) Score(ctx context.Context, cs *scheduling.CycleState, req *scheduling.Request, eps []*scheduling.Endpoint, scores []float64) {
	preds := s.predictor.PredictLatency(ctx, cs, req, eps)
	hs := make([]headroom, len(eps))
	known := false
	for i, e := range eps {
		if pr, ok := preds.Get(e.Name); ok {
			t, d := pr.Headrooms()
			hs[i] = headroom{ttft: t.Seconds(), tpot: d.Seconds(), inFlight: pr.InFlight, ok: true}
			known = true
		}
	}
	if !known {
		s.composite(ctx, cs, req, eps, scores)
		return
	}
	positive := func(h headroom) bool { return h.ok && h.ttft >= 0 && h.tpot >= 0 }
	pick := make([]bool, len(eps))
	hasPositive := false
	for i := range hs {
		hasPositive = hasPositive || positive(hs[i])
	}
	strategy := s.params.HeadroomSelectionStrategy
	switch {
	case hasPositive:
		for i := range hs {
			pick[i] = positive(hs[i])
		}
	default:
		strategy = HeadroomLeast
		idle := false
		for i := range hs {
			idle = idle || (hs[i].ok && hs[i].inFlight == 0)
		}
		if idle {
			for i := range hs {
				pick[i] = hs[i].ok && hs[i].inFlight == 0
			}
			break
		}
		// the least severe group: TPOT missed only, TTFT missed only, both
		for _, group := range []func(h headroom) bool{
			func(h headroom) bool { return h.ttft >= 0 && h.tpot < 0 },
			func(h headroom) bool { return h.ttft < 0 && h.tpot >= 0 },
			func(h headroom) bool { return h.ttft < 0 && h.tpot < 0 },
		} {
			found := false
			for i := range hs {
				pick[i] = hs[i].ok && group(hs[i])
				found = found || pick[i]
			}
			if found {
				break
			}
		}
	}
	s.blend(hs, pick, strategy, scores)
}

// blend scores the picked endpoints by their normalized headrooms.
func (s *Latency) blend(hs []headroom, pick []bool, strategy string, scores []float64) {
	minT, maxT, minD, maxD := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	for i, h := range hs {
		if pick[i] {
			minT, maxT, minD, maxD = min(minT, h.ttft), max(maxT, h.ttft), min(minD, h.tpot), max(maxD, h.tpot)
		}
	}
	wT, wD := s.params.TTFTWeight, s.params.TPOTWeight
	switch {
	case maxT == minT && maxD == minD:
		wT, wD = 1, 0 // all alike: every picked endpoint scores the same
	case maxT == minT:
		wT, wD = 0, 1
	case maxD == minD:
		wT, wD = 1, 0
	}
	norm := func(v, lo, hi float64) float64 {
		if hi == lo {
			return 1
		}
		if strategy == HeadroomMost && v >= 0 {
			return (v - lo) / (hi - lo)
		}
		if v >= 0 {
			return (hi - v) / (hi - lo) // least: closest to the SLO
		}
		return (v - lo) / (hi - lo) // missed: the nearest to being met
	}
	total := wT + wD
	if total == 0 {
		total = 1
	}
	for i, h := range hs {
		if pick[i] {
			scores[i] = (wT*norm(h.ttft, minT, maxT) + wD*norm(h.tpot, minD, maxD)) / total
		}
	}
}

// composite scores without predictions: KV use, queue and prefix share.
func (s *Latency) composite(ctx context.Context, cs *scheduling.CycleState, req *scheduling.Request, eps []*scheduling.Endpoint, scores []float64) {
	var m *scheduling.PrefixMatch
	if s.prefix != nil {
		m = s.prefix.MatchPrefix(ctx, cs, req, eps)
	}
	longest := 0
	for _, e := range eps {
		if e.Metrics != nil {
			longest = max(longest, e.Metrics.WaitingRequests)
		}
	}
	p := s.params
	total := p.CompositeKVWeight + p.CompositeQueueWeight + p.CompositePrefixWeight
	if total == 0 {
		return
	}
	for i, e := range eps {
		kv, queue := 0.0, 1.0
		if e.Metrics != nil {
			kv = 1 - math.Min(1, math.Max(0, e.Metrics.KVCacheUsage))
			if longest > 0 {
				queue = 1 - float64(e.Metrics.WaitingRequests)/float64(longest)
			}
		}
		prefix := 0.0
		if m != nil && m.TotalBlocks > 0 {
			prefix = float64(m.BlocksOf(e)) / float64(m.TotalBlocks)
		}
		scores[i] = (p.CompositeKVWeight*kv + p.CompositeQueueWeight*queue + p.CompositePrefixWeight*prefix) / total
	}
}
