package prefix

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"time"

	"github.com/hermod/hermod/libs/scheduling"
)

// Types of the llm-d router's split of the prefix scorer (v0.9+): the
// producer keeps the index and answers each request's match; scorers (and
// filters, deciders) read it by the producer's name.
const (
	ProducerType = "approx-prefix-cache-producer"
	// DefaultMatchLengthScaleTokens is the matched length that scores 1 on
	// its own (matchLengthWeight).
	DefaultMatchLengthScaleTokens = 8192
	// DefaultMaxPrefixTokensToMatch is upstream's default of
	// maxPrefixTokensToMatch; Hermod's index counts blocks
	// (maxPrefixBlocksToMatch), so the tokens are turned into blocks.
	DefaultMaxPrefixTokensToMatch = 131072
)

func init() {
	scheduling.Register(scheduling.Registration{Type: ProducerType, New: NewProducer})
	scheduling.Register(scheduling.Registration{Type: MultiClusterProducerType, New: newProducer(MultiClusterProducerType)})
	scheduling.Register(scheduling.Registration{Type: MultiClusterType, New: newScorer(MultiClusterType, MultiClusterProducerType)})
}

// The multi-cluster variants (llm-d router v0.10): over a pool whose
// endpoints are clusters (multicluster-file-discovery), the index keys
// blocks by cluster, so a repeated prefix goes back to the cluster that
// served it. They are approx-prefix-cache-producer and prefix-cache-scorer
// under their own types, with the same parameters; the scorer's default
// producer is a declared multicluster-approx-prefix-cache-producer.
const (
	MultiClusterProducerType = "multicluster-approx-prefix-cache-producer"
	MultiClusterType         = "multicluster-prefix-cache-scorer"
)

// Producer is approx-prefix-cache-producer: the approximate prefix index
// of prefix-cache-scorer without its score. It is a PrefixMatcher (the
// PrefixMatchInfo of upstream), records each decision's blocks for its
// targets and is a projection of the decision stream, as the scorer is.
type Producer struct {
	p *Plugin
}

// NewProducer builds an approx-prefix-cache-producer. Its parameters are
// the index's (autoTune, blockSizeTokens, maxPrefixBlocksToMatch or
// maxPrefixTokensToMatch, lruCapacityPerServer).
func NewProducer(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
	return newProducer(ProducerType)(name, raw, h)
}

func newProducer(typ string) scheduling.Factory {
	return func(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
		var w producerParams
		if err := scheduling.DecodeParameters(raw, &w, h); err != nil {
			return nil, err
		}
		p, err := newIndexPlugin(typ, name, w.wireParams, w.MaxPrefixTokensToMatch, h)
		if err != nil {
			return nil, err
		}
		return &Producer{p: p}, nil
	}
}

type producerParams struct {
	wireParams
	MaxPrefixTokensToMatch *int `json:"maxPrefixTokensToMatch"`
}

// TypedName implements scheduling.Plugin.
func (pr *Producer) TypedName() scheduling.TypedName { return pr.p.TypedName() }

// Parameters implements scheduling.ParameterReporter.
func (pr *Producer) Parameters() any { return pr.p.params }

// Index returns the producer's block index.
func (pr *Producer) Index() *Index { return pr.p.index }

// PrepareCycle implements scheduling.CyclePreparer.
func (pr *Producer) PrepareCycle(ctx context.Context, cs *scheduling.CycleState, req *scheduling.Request, candidates []*scheduling.Endpoint) {
	pr.p.PrepareCycle(ctx, cs, req, candidates)
}

// MatchPrefix implements scheduling.PrefixMatcher.
func (pr *Producer) MatchPrefix(ctx context.Context, cs *scheduling.CycleState, req *scheduling.Request, candidates []*scheduling.Endpoint) *scheduling.PrefixMatch {
	return pr.p.MatchPrefix(ctx, cs, req, candidates)
}

// PreRequest implements scheduling.PreRequest.
func (pr *Producer) PreRequest(ctx context.Context, cs *scheduling.CycleState, req *scheduling.Request, res *scheduling.Result) {
	pr.p.PreRequest(ctx, cs, req, res)
}

// ApplyEffect implements scheduling.Projection.
func (pr *Producer) ApplyEffect(decisionID uint64, at time.Time, e *scheduling.Effect) {
	pr.p.ApplyEffect(decisionID, at, e)
}

// InheritState implements scheduling.StateInheritor.
func (pr *Producer) InheritState(prev scheduling.Plugin) bool {
	if q, ok := prev.(*Producer); ok {
		return pr.p.InheritState(q.p)
	}
	return false
}

// EndpointRemoved implements scheduling.EndpointRemover.
func (pr *Producer) EndpointRemoved(name string) { pr.p.EndpointRemoved(name) }

// Bound is prefix-cache-scorer reading the match of a producer
// (prefixMatchInfoProducerName: approx-prefix-cache-producer,
// precise-prefix-cache-producer or any PrefixMatcher) instead of keeping
// an index of its own.
type Bound struct {
	scheduling.Named
	source scheduling.PrefixMatcher
	params BoundParams
}

// BoundParams are a bound prefix-cache-scorer's effective parameters.
type BoundParams struct {
	PrefixMatchInfoProducerName string  `json:"prefixMatchInfoProducerName"`
	MatchLengthWeight           float64 `json:"matchLengthWeight,omitempty"`
	MatchLengthScaleTokens      int     `json:"matchLengthScaleTokens,omitempty"`
}

// Parameters implements scheduling.ParameterReporter.
func (b *Bound) Parameters() any { return b.params }

// MatchPrefix implements scheduling.PrefixMatcher with its producer's
// match: what reads a prefix-cache-scorer's match (no-hit-lru-scorer, the
// deciders) reads the producer's.
func (b *Bound) MatchPrefix(ctx context.Context, cs *scheduling.CycleState, req *scheduling.Request, candidates []*scheduling.Endpoint) *scheduling.PrefixMatch {
	return b.source.MatchPrefix(ctx, cs, req, candidates)
}

// Score implements scheduling.Scorer.
func (b *Bound) Score(ctx context.Context, cs *scheduling.CycleState, req *scheduling.Request, eps []*scheduling.Endpoint, scores []float64) {
	m := b.source.MatchPrefix(ctx, cs, req, eps)
	if m == nil {
		return
	}
	scoreMatch(m, eps, scores, b.params.MatchLengthWeight, b.params.MatchLengthScaleTokens)
}

// scoreMatch scores each endpoint by its share of the prompt's blocks,
// blended with weight w with how long the match is against scale tokens:
// w x min(1, matched tokens / scale)^2 + (1 - w) x matched / total.
func scoreMatch(m *scheduling.PrefixMatch, eps []*scheduling.Endpoint, scores []float64, w float64, scale int) {
	if !m.Hit() || m.TotalBlocks == 0 {
		return
	}
	total := float64(m.TotalBlocks)
	for i, e := range eps {
		n := m.BlocksOf(e)
		if n <= 0 {
			continue
		}
		s := float64(n) / total
		if w > 0 && scale > 0 {
			l := math.Min(1, float64(n*m.BlockSizeTokens)/float64(scale))
			s = w*l*l + (1-w)*s
		}
		scores[i] = s
	}
}

// scorerParams are what prefix-cache-scorer takes: the producer it reads
// and how it scores, or (GIE's scorer, which keeps its own index) the
// index's parameters.
type scorerParams struct {
	wireParams
	PrefixMatchInfoProducerName *string  `json:"prefixMatchInfoProducerName"`
	MatchLengthWeight           *float64 `json:"matchLengthWeight"`
	MatchLengthScaleTokens      *int     `json:"matchLengthScaleTokens"`
}

func (w *wireParams) set() bool {
	return w.AutoTune != nil || w.BlockSizeTokens != nil || w.BlockSize != nil || w.MaxPrefixBlocksToMatch != nil || w.LRUCapacityPerServer != nil
}

// New builds a prefix-cache-scorer: bound to the producer
// prefixMatchInfoProducerName names, or to a declared
// approx-prefix-cache-producer of that name when it names none; else (and
// whenever it is given the index's parameters) with an index of its own,
// as GIE's scorer and upstream's default producer have.
func New(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
	return newScorer(Type, ProducerType)(name, raw, h)
}

// newScorer is New for scorer type typ, whose default producer is the one
// named defaultProducer.
func newScorer(typ, defaultProducer string) scheduling.Factory {
	return func(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
		return buildScorer(typ, defaultProducer, name, raw, h)
	}
}

func buildScorer(typ, defaultProducer, name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
	var w scorerParams
	if err := scheduling.DecodeParameters(raw, &w, h); err != nil {
		return nil, err
	}
	weight, scale := 0.0, DefaultMatchLengthScaleTokens
	if w.MatchLengthWeight != nil {
		weight = *w.MatchLengthWeight
		if weight < 0 || weight > 1 || math.IsNaN(weight) {
			return nil, scheduling.ParamErrorf("matchLengthWeight", "must be between 0 and 1 (got %v)", weight)
		}
	}
	if w.MatchLengthScaleTokens != nil {
		scale = *w.MatchLengthScaleTokens
		if scale < 1 {
			return nil, scheduling.ParamErrorf("matchLengthScaleTokens", "must be at least 1 (got %d)", scale)
		}
	}
	producer, named := defaultProducer, false
	if w.PrefixMatchInfoProducerName != nil && *w.PrefixMatchInfoProducerName != "" {
		producer, named = *w.PrefixMatchInfoProducerName, true
		if w.set() {
			return nil, scheduling.ParamErrorf("prefixMatchInfoProducerName", "the index parameters (blockSizeTokens, autoTune, ...) belong to the producer %s, not to a scorer reading it", producer)
		}
	}
	if named || !w.set() {
		src, err := h.Plugin(producer)
		switch {
		case err == nil:
			m, ok := src.(scheduling.PrefixMatcher)
			if !ok {
				return nil, scheduling.ParamErrorf("prefixMatchInfoProducerName", "plugin %q (type %s) produces no prefix match", producer, src.TypedName().Type)
			}
			params := BoundParams{PrefixMatchInfoProducerName: producer, MatchLengthWeight: weight}
			if weight > 0 {
				params.MatchLengthScaleTokens = scale
			}
			return &Bound{Named: scheduling.Named{Type: typ, Name: name}, source: m, params: params}, nil
		case named || !errors.Is(err, scheduling.ErrNotDeclared):
			return nil, scheduling.ParamErrorf("prefixMatchInfoProducerName", "%v", err)
		}
	}
	p, err := newIndexPlugin(typ, name, w.wireParams, nil, h)
	if err != nil {
		return nil, err
	}
	p.weight, p.scale = weight, scale
	if weight > 0 {
		p.params.MatchLengthWeight, p.params.MatchLengthScaleTokens = weight, scale
	}
	return p, nil
}
