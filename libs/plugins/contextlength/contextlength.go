// Package contextlength holds context-length-aware, a scorer (and, with
// enableFiltering, a filter) matching a request's estimated token count to
// the context-length ranges pods declare in a label.
package contextlength

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"
	"sync"

	"github.com/hermod/hermod/libs/scheduling"
)

// Type is the registered plugin type.
const Type = "context-length-aware"

// DefaultLabel holds "min-max[,min-max...]" token ranges.
const DefaultLabel = "mif.moreh.io/context-length-range"

// Scores of the non-matching cases.
const (
	scoreNoLabel     = 0.2
	scoreUnparsable  = 0.0
	scoreBelowRange  = 0.0
	widthScale       = 10000.0
	widthWeight      = 0.7
	positionWeight   = 0.3
	overflowBase     = 0.25
	overflowMaxBonus = 0.25
)

func init() {
	scheduling.Register(scheduling.Registration{Type: Type, New: New})
}

// Params are context-length-aware's parameters.
type Params struct {
	Label                 string  `json:"label"`
	EnableFiltering       bool    `json:"enableFiltering"`
	CharToTokenMultiplier float64 `json:"charToTokenMultiplier"`
}

// Plugin scores endpoints by context length. New returns a *Filtering (a
// Plugin that is also a Filter) when enableFiltering is set.
type Plugin struct {
	scheduling.Named
	params Params

	mu     sync.RWMutex
	ranges map[string][]Range // parsed label values; nil slice = unparsable
}

// Range is an inclusive token range.
type Range struct{ Min, Max float64 }

// New builds a context-length-aware plugin.
func New(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
	p := Params{Label: DefaultLabel, CharToTokenMultiplier: 0.25}
	if err := scheduling.DecodeParameters(raw, &p, h); err != nil {
		return nil, err
	}
	if p.Label == "" {
		return nil, scheduling.ParamErrorf("label", "must not be empty")
	}
	if !(p.CharToTokenMultiplier > 0) {
		return nil, scheduling.ParamErrorf("charToTokenMultiplier", "must be greater than 0 (got %v)", p.CharToTokenMultiplier)
	}
	pl := &Plugin{Named: scheduling.Named{Type: Type, Name: name}, params: p, ranges: map[string][]Range{}}
	if p.EnableFiltering {
		return &Filtering{pl}, nil
	}
	return pl, nil
}

// Filtering is context-length-aware with enableFiltering: a scorer and a
// filter.
type Filtering struct{ *Plugin }

// Parameters implements scheduling.ParameterReporter.
func (p *Plugin) Parameters() any { return p.params }

// PrepareCycle implements scheduling.CyclePreparer: the prompt's
// characters are counted before the scheduler's critical section.
func (p *Plugin) PrepareCycle(_ context.Context, _ *scheduling.CycleState, req *scheduling.Request, _ []*scheduling.Endpoint) {
	req.PromptChars()
}

// Score implements scheduling.Scorer.
func (p *Plugin) Score(_ context.Context, _ *scheduling.CycleState, req *scheduling.Request, eps []*scheduling.Endpoint, scores []float64) {
	l := req.EstimatedTokens(p.params.CharToTokenMultiplier)
	for i, e := range eps {
		v, ok := e.Labels[p.params.Label]
		if !ok {
			scores[i] = scoreNoLabel
			continue
		}
		ranges := p.parsed(v)
		if ranges == nil {
			scores[i] = scoreUnparsable
			continue
		}
		best := 0.0
		for _, r := range ranges {
			best = math.Max(best, ScoreRange(r, l))
		}
		scores[i] = best
	}
}

// Filter implements scheduling.Filter: it keeps endpoints without the label
// and those with a range covering the request.
func (p *Filtering) Filter(_ context.Context, _ *scheduling.CycleState, req *scheduling.Request, in, dst []*scheduling.Endpoint) []*scheduling.Endpoint {
	l := req.EstimatedTokens(p.params.CharToTokenMultiplier)
	for _, e := range in {
		v, ok := e.Labels[p.params.Label]
		if !ok {
			dst = append(dst, e)
			continue
		}
		for _, r := range p.parsed(v) {
			if l >= r.Min && l <= r.Max {
				dst = append(dst, e)
				break
			}
		}
	}
	return dst
}

// ScoreRange scores a request of l tokens against one range: inside it,
// 0.7 x 1/(1 + width/10000) + 0.3 x (max - l)/width (a zero-width range
// has no headroom: position 0); above it, 0.25 + 0.25 x max/l; below it, 0.
func ScoreRange(r Range, l float64) float64 {
	switch {
	case l < r.Min:
		return scoreBelowRange
	case l > r.Max:
		return overflowBase + overflowMaxBonus*r.Max/l
	}
	width := r.Max - r.Min
	position := 0.0
	if width > 0 {
		position = (r.Max - l) / width
	}
	return widthWeight/(1+width/widthScale) + positionWeight*position
}

// maxCachedLabels bounds the parsed-label cache.
const maxCachedLabels = 4096

func (p *Plugin) parsed(v string) []Range {
	p.mu.RLock()
	r, ok := p.ranges[v]
	p.mu.RUnlock()
	if ok {
		return r
	}
	r, err := ParseRanges(v)
	if err != nil {
		r = nil
	}
	p.mu.Lock()
	if len(p.ranges) >= maxCachedLabels {
		clear(p.ranges)
	}
	p.ranges[v] = r
	p.mu.Unlock()
	return r
}

// ParseRanges parses "min-max[,min-max...]" (0 <= min <= max).
func ParseRanges(v string) ([]Range, error) {
	var out []Range
	for part := range strings.SplitSeq(v, ",") {
		lo, hi, ok := strings.Cut(strings.TrimSpace(part), "-")
		if !ok {
			return nil, errors.New("range must be min-max")
		}
		mn, err1 := strconv.ParseUint(strings.TrimSpace(lo), 10, 63)
		mx, err2 := strconv.ParseUint(strings.TrimSpace(hi), 10, 63)
		if err1 != nil || err2 != nil {
			return nil, errors.New("range bounds must be non-negative integers")
		}
		if mx < mn {
			return nil, errors.New("range max must be >= min")
		}
		out = append(out, Range{Min: float64(mn), Max: float64(mx)})
	}
	return out, nil
}
