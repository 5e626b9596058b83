package filter

import (
	"context"
	"encoding/json"
	"math"

	"github.com/hermod/hermod/libs/plugins/inflightload"
	"github.com/hermod/hermod/libs/scheduling"
)

// PrefixAffinityType is the llm-d router's prefix-cache-affinity-filter:
// it narrows the candidates to the sticky ones, those holding at least
// affinityThreshold of the prompt's blocks (by a prefix-cache producer's
// match), so that a picker spreads the load among the endpoints that have
// the prompt cached instead of piling it on the best one or losing the
// cache. It keeps every candidate when none is sticky, with probability
// explorationProbability (to seed the cache elsewhere), and when the
// sticky endpoints' estimated TTFT exceeds the others' best by more than
// maxTTFTPenaltyMs (so that a hot prefix does not overload its holders).
const PrefixAffinityType = "prefix-cache-affinity-filter"

// TTFT sources of prefix-cache-affinity-filter's load gate.
const (
	TTFTPrefillThroughput = "prefillThroughput"
	TTFTLatencyPredictor  = "latencyPredictor"
)

func init() {
	scheduling.Register(scheduling.Registration{Type: PrefixAffinityType, New: newPrefixAffinity})
}

// PrefixAffinityParams are prefix-cache-affinity-filter's parameters.
type PrefixAffinityParams struct {
	AffinityThreshold      float64 `json:"affinityThreshold"`
	ExplorationProbability float64 `json:"explorationProbability"`
	MaxTTFTPenaltyMs       float64 `json:"maxTTFTPenaltyMs"`
	TTFTSource             string  `json:"ttftSource"`
	// PeakPrefillThroughput (tokens/s) turns in-flight tokens into a TTFT
	// estimate: tokens / throughput.
	PeakPrefillThroughput       float64 `json:"peakPrefillThroughput"`
	PrefixMatchInfoProducerName string  `json:"prefixMatchInfoProducerName,omitempty"`
	InFlightLoadProducerName    string  `json:"inFlightLoadProducerName,omitempty"`
}

// PrefixAffinity is prefix-cache-affinity-filter.
type PrefixAffinity struct {
	scheduling.Named
	params PrefixAffinityParams
	prefix scheduling.PrefixMatcher
	load   scheduling.InFlightLoader
}

func newPrefixAffinity(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
	p := PrefixAffinityParams{AffinityThreshold: 0.8, MaxTTFTPenaltyMs: 18000, TTFTSource: TTFTPrefillThroughput, PeakPrefillThroughput: 15928}
	if err := scheduling.DecodeParameters(raw, &p, h); err != nil {
		return nil, err
	}
	switch {
	case !(p.AffinityThreshold >= 0 && p.AffinityThreshold <= 1):
		return nil, scheduling.ParamErrorf("affinityThreshold", "must be in [0, 1] (got %v)", p.AffinityThreshold)
	case !(p.ExplorationProbability >= 0 && p.ExplorationProbability <= 1):
		return nil, scheduling.ParamErrorf("explorationProbability", "must be in [0, 1] (got %v)", p.ExplorationProbability)
	case !(p.MaxTTFTPenaltyMs >= 0) || math.IsInf(p.MaxTTFTPenaltyMs, 0):
		return nil, scheduling.ParamErrorf("maxTTFTPenaltyMs", "must not be negative (got %v)", p.MaxTTFTPenaltyMs)
	case p.TTFTSource != TTFTPrefillThroughput && p.TTFTSource != TTFTLatencyPredictor:
		return nil, scheduling.ParamErrorf("ttftSource", "%q is not %s or %s", p.TTFTSource, TTFTPrefillThroughput, TTFTLatencyPredictor)
	case !(p.PeakPrefillThroughput > 0) || math.IsInf(p.PeakPrefillThroughput, 0):
		return nil, scheduling.ParamErrorf("peakPrefillThroughput", "must be positive (got %v)", p.PeakPrefillThroughput)
	}
	f := &PrefixAffinity{Named: scheduling.Named{Type: PrefixAffinityType, Name: name}, params: p}
	m, err := scheduling.PrefixMatcherFor(h, p.PrefixMatchInfoProducerName)
	if err != nil {
		return nil, err
	}
	if m == nil {
		h.Warn(PrefixAffinityType + ": no prefix-cache producer is declared before it: no endpoint is ever sticky, so it keeps every candidate")
	}
	f.prefix = m
	if p.MaxTTFTPenaltyMs > 0 && p.TTFTSource == TTFTPrefillThroughput {
		if f.load, err = inflightload.Loader(h, p.InFlightLoadProducerName); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// Parameters implements scheduling.ParameterReporter.
func (f *PrefixAffinity) Parameters() any { return f.params }

// Filter implements scheduling.Filter.
func (f *PrefixAffinity) Filter(ctx context.Context, cs *scheduling.CycleState, req *scheduling.Request, in, dst []*scheduling.Endpoint) []*scheduling.Endpoint {
	if f.prefix == nil || (f.params.ExplorationProbability > 0 && cs.Rand().Float64() < f.params.ExplorationProbability) {
		return append(dst, in...)
	}
	m := f.prefix.MatchPrefix(ctx, cs, req, in)
	if m == nil || m.TotalBlocks == 0 || m.Len() == 0 {
		return append(dst, in...)
	}
	start := len(dst)
	bestSticky, bestOther := math.Inf(1), math.Inf(1)
	for _, e := range in {
		ttft, known := f.ttft(cs, e)
		if float64(m.BlocksOf(e))/float64(m.TotalBlocks) >= f.params.AffinityThreshold {
			dst = append(dst, e)
			if known {
				bestSticky = min(bestSticky, ttft)
			}
		} else if known {
			bestOther = min(bestOther, ttft)
		}
	}
	switch {
	case len(dst) == start:
		return append(dst, in...)
	case f.params.MaxTTFTPenaltyMs > 0 && !math.IsInf(bestSticky, 1) && !math.IsInf(bestOther, 1) &&
		bestSticky-bestOther > f.params.MaxTTFTPenaltyMs:
		// the sticky endpoints are overloaded: break stickiness
		return append(dst[:start], in...)
	}
	return dst
}

// ttft is e's estimated time to first token in milliseconds, from its
// in-flight tokens or from the latency predictor; false when unknown.
func (f *PrefixAffinity) ttft(cs *scheduling.CycleState, e *scheduling.Endpoint) (float64, bool) {
	if f.params.MaxTTFTPenaltyMs == 0 {
		return 0, false
	}
	if f.params.TTFTSource == TTFTLatencyPredictor {
		preds, ok := scheduling.ReadState[*scheduling.Predictions](cs, scheduling.PredictionsKey)
		if !ok || preds == nil {
			return 0, false
		}
		p, ok := preds.Get(e.Name)
		return float64(p.TTFT.Milliseconds()), ok
	}
	return float64(f.load.InFlightLoad(e).Tokens) / f.params.PeakPrefillThroughput * 1000, true
}
