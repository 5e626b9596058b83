// Package endpointattribute holds the llm-d router's generic attribute
// plugins: endpoint-attribute-filter keeps the endpoints whose value of
// one numeric attribute passes a threshold, and endpoint-attribute-scorer
// ranks endpoints linearly by one. The attributes are those of the data
// layer (dcgm-extractor's GPUUtilization/dcgm-extractor, say) or the
// engine gauges under the keys of upstream's core-metrics-extractor
// (WaitingQueueSize, RunningRequestsSize, KVCacheUsagePercent, ...); see
// scheduling.Endpoint.Attribute.
package endpointattribute

import (
	"context"
	"encoding/json"
	"math"

	"github.com/hermod/hermod/libs/scheduling"
)

// Plugin types.
const (
	FilterType = "endpoint-attribute-filter"
	ScorerType = "endpoint-attribute-scorer"
)

func init() {
	scheduling.Register(scheduling.Registration{Type: FilterType, New: NewFilter})
	scheduling.Register(scheduling.Registration{Type: ScorerType, New: NewScorer})
}

// Operator compares an attribute with a threshold.
type Operator string

// Operators.
const (
	LessThan           Operator = "LessThan"
	LessThanOrEqual    Operator = "LessThanOrEqual"
	GreaterThan        Operator = "GreaterThan"
	GreaterThanOrEqual Operator = "GreaterThanOrEqual"
	Equal              Operator = "Equal"
	NotEqual           Operator = "NotEqual"
)

// holds reports whether v op threshold.
func (op Operator) holds(v, threshold float64) bool {
	switch op {
	case LessThan:
		return v < threshold
	case LessThanOrEqual:
		return v <= threshold
	case GreaterThan:
		return v > threshold
	case GreaterThanOrEqual:
		return v >= threshold
	case Equal:
		return v == threshold
	case NotEqual:
		return v != threshold
	}
	return false
}

func (op Operator) valid() bool {
	switch op {
	case LessThan, LessThanOrEqual, GreaterThan, GreaterThanOrEqual, Equal, NotEqual:
		return true
	}
	return false
}

// FilterParams are endpoint-attribute-filter's parameters.
type FilterParams struct {
	Attribute string `json:"attribute"`
	// OnMissing is what becomes of an endpoint without the attribute:
	// "Pass" keeps it, "Fail" drops it.
	OnMissing string `json:"onMissing"`
	// FallbackOnEmpty keeps every candidate when none passes.
	FallbackOnEmpty bool            `json:"fallbackOnEmpty"`
	Algorithm       FilterAlgorithm `json:"algorithm"`
}

// FilterAlgorithm is how the filter decides; threshold is the one there is.
type FilterAlgorithm struct {
	Type      string     `json:"type"`
	Threshold *Threshold `json:"threshold,omitempty"`
}

// Threshold keeps an endpoint when its value Operator Value holds.
type Threshold struct {
	Operator Operator `json:"operator"`
	Value    *float64 `json:"value"`
}

// Filter is endpoint-attribute-filter.
type Filter struct {
	scheduling.Named
	params      FilterParams
	keepMissing bool
}

// NewFilter builds an endpoint-attribute-filter.
func NewFilter(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
	p := FilterParams{OnMissing: "Pass"}
	if err := scheduling.DecodeParameters(raw, &p, h); err != nil {
		return nil, err
	}
	switch {
	case p.Attribute == "":
		return nil, scheduling.ParamErrorf("attribute", "is required: the endpoint attribute to filter by (GPUUtilization/dcgm-extractor, KVCacheUsagePercent, ...)")
	case p.OnMissing != "Pass" && p.OnMissing != "Fail":
		return nil, scheduling.ParamErrorf("onMissing", `must be "Pass" or "Fail" (got %q)`, p.OnMissing)
	case p.Algorithm.Type != "threshold":
		return nil, scheduling.ParamErrorf("algorithm.type", `must be "threshold", the one algorithm there is (got %q)`, p.Algorithm.Type)
	case p.Algorithm.Threshold == nil:
		return nil, scheduling.ParamErrorf("algorithm.threshold", "is required with type threshold")
	case !p.Algorithm.Threshold.Operator.valid():
		return nil, scheduling.ParamErrorf("algorithm.threshold.operator", "must be LessThan, LessThanOrEqual, GreaterThan, GreaterThanOrEqual, Equal or NotEqual (got %q)", p.Algorithm.Threshold.Operator)
	case p.Algorithm.Threshold.Value == nil:
		return nil, scheduling.ParamErrorf("algorithm.threshold.value", "is required")
	}
	return &Filter{Named: scheduling.Named{Type: FilterType, Name: name}, params: p, keepMissing: p.OnMissing == "Pass"}, nil
}

// Parameters implements scheduling.ParameterReporter.
func (f *Filter) Parameters() any { return f.params }

// Filter implements scheduling.Filter.
func (f *Filter) Filter(_ context.Context, _ *scheduling.CycleState, _ *scheduling.Request, in, dst []*scheduling.Endpoint) []*scheduling.Endpoint {
	t := f.params.Algorithm.Threshold
	start := len(dst)
	for _, e := range in {
		v, ok := e.Attribute(f.params.Attribute)
		if ok && t.Operator.holds(v, *t.Value) || !ok && f.keepMissing {
			dst = append(dst, e)
		}
	}
	if len(dst) == start && f.params.FallbackOnEmpty {
		dst = append(dst, in...)
	}
	return dst
}

// Scorer algorithms.
const (
	LinearLowerIsBetter  = "linear_lower_is_better"
	LinearHigherIsBetter = "linear_higher_is_better"
)

// ScorerParams are endpoint-attribute-scorer's parameters.
type ScorerParams struct {
	AttributeKey string          `json:"attributeKey"`
	Algorithm    ScorerAlgorithm `json:"algorithm"`
}

// ScorerAlgorithm says which way the attribute scores and over what range.
type ScorerAlgorithm struct {
	Type          string         `json:"type"`
	Normalization *Normalization `json:"normalization,omitempty"`
}

// Normalization is the range values are scaled over: the candidates'
// (adaptiveRange, the default) or a fixed one.
type Normalization struct {
	AdaptiveRange *struct{} `json:"adaptiveRange,omitempty"`
	FixedRange    *Range    `json:"fixedRange,omitempty"`
}

// Range is a fixed normalization range.
type Range struct {
	Min *float64 `json:"min"`
	Max *float64 `json:"max"`
}

// Scorer is endpoint-attribute-scorer: (v - min) / (max - min), inverted
// for linear_lower_is_better; an endpoint without the attribute scores 0.
type Scorer struct {
	scheduling.Named
	params   ScorerParams
	lower    bool
	fixed    bool
	min, max float64
}

// NewScorer builds an endpoint-attribute-scorer.
func NewScorer(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
	var p ScorerParams
	if err := scheduling.DecodeParameters(raw, &p, h); err != nil {
		return nil, err
	}
	s := &Scorer{Named: scheduling.Named{Type: ScorerType, Name: name}, params: p}
	switch p.Algorithm.Type {
	case LinearLowerIsBetter:
		s.lower = true
	case LinearHigherIsBetter:
	default:
		return nil, scheduling.ParamErrorf("algorithm.type", "must be %q or %q (got %q)", LinearLowerIsBetter, LinearHigherIsBetter, p.Algorithm.Type)
	}
	if p.AttributeKey == "" {
		return nil, scheduling.ParamErrorf("attributeKey", "is required: the endpoint attribute to score by")
	}
	if n := p.Algorithm.Normalization; n != nil {
		if n.AdaptiveRange != nil && n.FixedRange != nil {
			return nil, scheduling.ParamErrorf("algorithm.normalization", "at most one of adaptiveRange and fixedRange")
		}
		if r := n.FixedRange; r != nil {
			if r.Min == nil || r.Max == nil || !(*r.Min < *r.Max) {
				return nil, scheduling.ParamErrorf("algorithm.normalization.fixedRange", "needs min and max, min less than max")
			}
			s.fixed, s.min, s.max = true, *r.Min, *r.Max
		}
	}
	return s, nil
}

// Parameters implements scheduling.ParameterReporter.
func (s *Scorer) Parameters() any { return s.params }

// Score implements scheduling.Scorer.
func (s *Scorer) Score(_ context.Context, _ *scheduling.CycleState, _ *scheduling.Request, eps []*scheduling.Endpoint, scores []float64) {
	lo, hi := s.min, s.max
	if !s.fixed {
		lo, hi = math.Inf(1), math.Inf(-1)
		for _, e := range eps {
			if v, ok := e.Attribute(s.params.AttributeKey); ok && !math.IsNaN(v) {
				lo, hi = min(lo, v), max(hi, v)
			}
		}
	}
	for i, e := range eps {
		v, ok := e.Attribute(s.params.AttributeKey)
		if !ok || math.IsNaN(v) {
			continue
		}
		if hi <= lo { // every endpoint with the attribute has the same value
			scores[i] = 1
			continue
		}
		x := (min(max(v, lo), hi) - lo) / (hi - lo)
		if s.lower {
			x = 1 - x
		}
		scores[i] = x
	}
}
