package admission

import (
	"context"
	"encoding/json"
	"math"

	"github.com/hermod/hermod/libs/plugins/inflightload"
	"github.com/hermod/hermod/libs/scheduling"
)

// ConcurrencyDetectorType is the llm-d router's concurrency-detector: a
// saturation detector (and filter) on the in-flight load
// inflight-load-producer counts, rather than on the engines' metrics.
const ConcurrencyDetectorType = "concurrency-detector"

// Modes of concurrency-detector.
const (
	ModeRequests = "requests"
	ModeTokens   = "tokens"
	ModeHybrid   = "hybrid"
)

// Defaults of concurrency-detector.
const (
	DefaultMaxConcurrency      = 100
	DefaultMaxTokenConcurrency = 1000000
)

func init() {
	scheduling.Register(scheduling.Registration{Type: ConcurrencyDetectorType, New: newConcurrency})
}

// ConcurrencyParams are concurrency-detector's parameters.
type ConcurrencyParams struct {
	ConcurrencyMode          string  `json:"concurrencyMode"`
	MaxConcurrency           int64   `json:"maxConcurrency"`
	MaxTokenConcurrency      int64   `json:"maxTokenConcurrency"`
	Headroom                 float64 `json:"headroom"`
	InFlightLoadProducerName string  `json:"inFlightLoadProducerName,omitempty"`
}

// Concurrency is concurrency-detector. Each endpoint's capacity is
// maxConcurrency requests (requests mode), maxTokenConcurrency tokens
// (tokens mode) or both (hybrid). The pool's saturation is its in-flight
// load over its capacity (hybrid: the mean over the endpoints of the
// larger of the two shares); an empty pool is saturated. As a filter it
// keeps the endpoints below capacity x (1 + headroom), and may keep none.
type Concurrency struct {
	scheduling.Named
	params ConcurrencyParams
	load   scheduling.InFlightLoader
}

func newConcurrency(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
	p, err := ParseConcurrencyParams(raw, h)
	if err != nil {
		return nil, err
	}
	l, err := inflightload.Loader(h, p.InFlightLoadProducerName)
	if err != nil {
		return nil, err
	}
	return &Concurrency{Named: scheduling.Named{Type: ConcurrencyDetectorType, Name: name}, params: p, load: l}, nil
}

// ParseConcurrencyParams reads and checks concurrency-detector's
// parameters (h, which may be nil, hears the warnings).
func ParseConcurrencyParams(raw json.RawMessage, h scheduling.Handle) (ConcurrencyParams, error) {
	p := ConcurrencyParams{ConcurrencyMode: ModeRequests, MaxConcurrency: DefaultMaxConcurrency, MaxTokenConcurrency: DefaultMaxTokenConcurrency}
	if err := scheduling.DecodeParameters(raw, &p, h); err != nil {
		return ConcurrencyParams{}, err
	}
	switch p.ConcurrencyMode {
	case ModeRequests, ModeTokens, ModeHybrid:
	case "":
		p.ConcurrencyMode = ModeRequests
	default:
		return ConcurrencyParams{}, scheduling.ParamErrorf("concurrencyMode", "%q is not %s, %s or %s", p.ConcurrencyMode, ModeRequests, ModeTokens, ModeHybrid)
	}
	if p.MaxConcurrency < 1 {
		return ConcurrencyParams{}, scheduling.ParamErrorf("maxConcurrency", "must be at least 1 (got %d)", p.MaxConcurrency)
	}
	if p.MaxTokenConcurrency < 1 {
		return ConcurrencyParams{}, scheduling.ParamErrorf("maxTokenConcurrency", "must be at least 1 (got %d)", p.MaxTokenConcurrency)
	}
	if p.Headroom < 0 || math.IsNaN(p.Headroom) || math.IsInf(p.Headroom, 0) {
		return ConcurrencyParams{}, scheduling.ParamErrorf("headroom", "must not be negative (got %v)", p.Headroom)
	}
	return p, nil
}

// Parameters implements scheduling.ParameterReporter.
func (c *Concurrency) Parameters() any { return c.params }

// Saturation implements scheduling.SaturationDetector.
func (c *Concurrency) Saturation(_ context.Context, candidates []*scheduling.Endpoint) float64 {
	if len(candidates) == 0 {
		return 1
	}
	var requests, tokens, hybrid float64
	for _, e := range candidates {
		l := c.load.InFlightLoad(e)
		r, t := float64(l.Requests)/float64(c.params.MaxConcurrency), float64(l.Tokens)/float64(c.params.MaxTokenConcurrency)
		requests, tokens, hybrid = requests+r, tokens+t, hybrid+math.Max(r, t)
	}
	n := float64(len(candidates))
	switch c.params.ConcurrencyMode {
	case ModeTokens:
		return tokens / n
	case ModeHybrid:
		return hybrid / n
	}
	return requests / n
}

// ShedsLoad implements scheduling.LoadShedder.
func (c *Concurrency) ShedsLoad() {}

// Filter implements scheduling.Filter.
func (c *Concurrency) Filter(_ context.Context, _ *scheduling.CycleState, _ *scheduling.Request, in, dst []*scheduling.Endpoint) []*scheduling.Endpoint {
	maxRequests := int64(float64(c.params.MaxConcurrency) * (1 + c.params.Headroom))
	maxTokens := int64(float64(c.params.MaxTokenConcurrency) * (1 + c.params.Headroom))
	for _, e := range in {
		l := c.load.InFlightLoad(e)
		below := int64(l.Requests) < maxRequests
		switch c.params.ConcurrencyMode {
		case ModeTokens:
			below = l.Tokens < maxTokens
		case ModeHybrid:
			below = below && l.Tokens < maxTokens
		}
		if below {
			dst = append(dst, e)
		}
	}
	return dst
}
