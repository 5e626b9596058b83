// Package preciseprefix holds precise-prefix-cache-scorer: it keys the
// prompt's blocks the way hermod-indexer keys the engines' KV events, asks
// the indexer which candidates hold the longest run of them, and scores by
// that run (spec/scheduling.md). When the indexer is slow or down it fails
// open: every candidate scores alike, and routing goes on on the other
// scorers.
package preciseprefix

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	indexerv1 "github.com/hermod/hermod/libs/api/hermod/indexer/v1"
	"github.com/hermod/hermod/libs/kv/blockkey"
	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/libs/telemetry"
	"github.com/hermod/hermod/libs/tokenizer"
)

// Type is the registered plugin type.
const Type = "precise-prefix-cache-scorer"

// IndexerService is the key under which the picker provides its indexer
// client (scheduling.Provide); the plugin does not load without one.
const IndexerService scheduling.ServiceKey[Indexer] = "indexer"

// Indexer answers which endpoints hold a prompt's blocks.
type Indexer interface {
	Score(ctx context.Context, req *indexerv1.ScoreRequest) (*indexerv1.ScoreResponse, error)
}

// TokenizerService is the key under which the picker may provide a
// Tokenizers (default: DefaultTokenizers).
const TokenizerService scheduling.ServiceKey[Tokenizers] = "tokenizers"

// Tokenizers resolves the tokenizer a configuration names.
type Tokenizers interface {
	Tokenizer(cfg TokenizersPoolConfig) (tokenizer.Tokenizer, tokenizer.ChatTemplate, error)
}

// DefaultTimeout bounds one Score call to the indexer; past it the plugin
// fails open.
const DefaultTimeout = 50 * time.Millisecond

func init() {
	scheduling.Register(scheduling.Registration{Type: Type, New: New})
}

// Plugin is precise-prefix-cache-scorer.
type Plugin struct {
	scheduling.Named
	params  Params
	ttl     time.Duration
	keyer   *blockkey.Keyer
	indexer Indexer
	prompts *PromptTokenizer
	agree   *agreement
	log     *slog.Logger
	key     scheduling.StateKey
	pool    sync.Pool
	metrics indexerMetrics
	// down logs the indexer's failures (the first, then one line per
	// interval) and its recovery, not one line per request.
	down telemetry.FailureLog
}

// New builds the plugin.
func New(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
	p, ttl, err := decodeParams(raw, h)
	if err != nil {
		return nil, err
	}
	idx, ok := IndexerService.Lookup(h)
	if !ok {
		return nil, errors.New("needs hermod-indexer: start the picker with --indexer-address")
	}
	prompts, err := NewPromptTokenizer(h, p.IndexerConfig.TokenizersPoolConfig, h.Logger().With("plugin", name))
	if err != nil {
		return nil, scheduling.ParamErrorf("indexerConfig.tokenizersPoolConfig", "%v", err)
	}
	keyer, err := blockkey.New(p.TokenProcessorConfig.BlockSize, uint64(p.TokenProcessorConfig.HashSeed))
	if err != nil {
		return nil, scheduling.ParamErrorf("tokenProcessorConfig.blockSize", "%v", err)
	}
	if name == "" {
		name = Type
	}
	pl := &Plugin{
		Named: scheduling.Named{Type: Type, Name: name}, params: p, ttl: ttl, keyer: keyer, indexer: idx, prompts: prompts,
		log: h.Logger().With("plugin", name), key: scheduling.StateKey(Type + "/" + name), metrics: newIndexerMetrics(h),
	}
	pl.down.Log = pl.log
	pl.agree = newAgreement(h, pl.log)
	pl.pool.New = func() any { return &match{plugin: pl} }
	return pl, nil
}

// Parameters implements scheduling.ParameterReporter.
func (p *Plugin) Parameters() any { return p.params }

// match is a request's answer from the indexer, kept for the cycle.
type match struct {
	scheduling.PrefixMatch
	tokens []uint32
	keys   []blockkey.Key
	wire   []uint64
	raw    map[string]float64 // endpoint -> tier-weighted run
	plugin *Plugin
}

// Release implements scheduling.Releaser.
func (m *match) Release() {
	m.Clear()
	m.tokens, m.keys, m.wire = m.tokens[:0], m.keys[:0], m.wire[:0]
	clear(m.raw)
	m.plugin.pool.Put(m)
}

// PrepareCycle implements scheduling.CyclePreparer: the prompt is
// tokenized and keyed and the indexer asked which candidates hold it
// before the scheduler's critical section, concurrently with other
// requests; Score, MatchPrefix and PreRequest read the answer from cs.
func (p *Plugin) PrepareCycle(ctx context.Context, cs *scheduling.CycleState, req *scheduling.Request, candidates []*scheduling.Endpoint) {
	p.match(ctx, cs, req, candidates)
}

// MatchPrefix implements scheduling.PrefixMatcher: no-hit-lru-scorer and
// the prefix-based P/D decider read what the indexer said.
func (p *Plugin) MatchPrefix(ctx context.Context, cs *scheduling.CycleState, req *scheduling.Request, candidates []*scheduling.Endpoint) *scheduling.PrefixMatch {
	return &p.match(ctx, cs, req, candidates).PrefixMatch
}

// root is the chain the request's blocks start from: its LoRA adapter, or
// the model it names.
func root(req *scheduling.Request) string {
	if req.Adapter != "" {
		return req.Adapter
	}
	return req.Model
}

// match returns the request's match, computing it (tokens, keys, the
// indexer's answer) unless PrepareCycle already did.
func (p *Plugin) match(ctx context.Context, cs *scheduling.CycleState, req *scheduling.Request, candidates []*scheduling.Endpoint) *match {
	if m, ok := scheduling.ReadState[*match](cs, p.key); ok {
		return m
	}
	m := p.pool.Get().(*match)
	if m.raw == nil {
		m.raw = map[string]float64{}
	}
	cs.Write(p.key, m)
	cs.Write(scheduling.PrefixMatchKey, &m.PrefixMatch)
	m.BlockSizeTokens = p.keyer.BlockSize()
	tokens := req.TokenIDs
	if len(tokens) == 0 {
		m.tokens, _ = p.prompts.Tokenize(ctx, m.tokens[:0], req) // none: no blocks to match
		tokens = m.tokens
	}
	m.keys = p.keyer.Prompt(m.keys[:0], root(req), tokens)
	m.TotalBlocks = len(m.keys)
	if len(m.keys) == 0 || len(candidates) == 0 {
		return m
	}
	for _, k := range m.keys {
		m.wire = append(m.wire, uint64(k))
	}
	names := make([]string, len(candidates))
	for i, e := range candidates {
		names[i] = e.Name
	}
	ctx, cancel := context.WithTimeout(ctx, DefaultTimeout)
	defer cancel()
	start := time.Now()
	resp, err := p.indexer.Score(ctx, &indexerv1.ScoreRequest{Model: req.Model, LoraName: req.Adapter, BlockKeys: m.wire, Candidates: names})
	p.metrics.latency.Observe(time.Since(start).Seconds())
	if err != nil {
		p.metrics.failOpen.Inc()
		p.down.Failed(ctx, "the indexer did not answer: scoring every endpoint alike",
			slog.String("request_id", req.ID), slog.String("error", err.Error()))
		return m
	}
	p.down.Succeeded(ctx, "the indexer answers again: scoring by its prefix matches", slog.String("request_id", req.ID))
	byName := make(map[string]*scheduling.Endpoint, len(candidates))
	for _, e := range candidates {
		byName[e.Name] = e
	}
	for _, s := range resp.GetScores() {
		if s.GetBlocks() <= 0 {
			continue
		}
		if e, ok := byName[s.GetEndpoint()]; ok {
			m.Set(e.Name, e.NameHash(), int(s.GetBlocks()))
			m.raw[e.Name] = s.GetScore()
		}
	}
	return m
}

// PreRequest implements scheduling.PreRequest: with speculativeIndexing,
// the decision records that its targets will hold the prompt's blocks;
// hermod-indexer reads the effect from the decision stream and counts them
// as held until the engines' events confirm them or speculativeTTL passes
// (the effect's capacity carries the TTL, in milliseconds).
func (p *Plugin) PreRequest(_ context.Context, cs *scheduling.CycleState, _ *scheduling.Request, res *scheduling.Result) {
	m, ok := scheduling.ReadState[*match](cs, p.key)
	if !ok || len(m.wire) == 0 {
		return
	}
	if t, ok := res.Primary.Target(); ok {
		p.agree.expect(res.DecisionID, m.CachedTokens(t.Endpoint.Name))
	}
	if !p.params.SpeculativeIndexing {
		return
	}
	var buf [2]string
	if names := res.ServingNames(buf[:0]); len(names) > 0 {
		res.RecordEffect(p, names, m.wire, p.ttl.Milliseconds())
	}
}

// ResponseComplete implements scheduling.ResponseComplete: the engine's
// reported cached tokens are checked against the index's prediction.
func (p *Plugin) ResponseComplete(ctx context.Context, resp *scheduling.Response) {
	p.agree.completed(ctx, resp.DecisionID, resp.Usage.CachedTokens)
}

// Score implements scheduling.Scorer: an endpoint's tier-weighted run of
// the prompt's blocks, min-max normalised over the endpoints that hold
// any (all alike: 1.0); the others score 0.
func (p *Plugin) Score(ctx context.Context, cs *scheduling.CycleState, req *scheduling.Request, eps []*scheduling.Endpoint, scores []float64) {
	m := p.match(ctx, cs, req, eps)
	if len(m.raw) == 0 {
		return
	}
	lo, hi := 0.0, 0.0
	first := true
	for _, e := range eps {
		if r, ok := m.raw[e.Name]; ok {
			if first || r < lo {
				lo = r
			}
			if first || r > hi {
				hi = r
			}
			first = false
		}
	}
	for i, e := range eps {
		r, ok := m.raw[e.Name]
		switch {
		case !ok:
			scores[i] = 0
		case hi == lo:
			scores[i] = 1
		default:
			scores[i] = (r - lo) / (hi - lo)
		}
	}
}

// indexerMetrics are the plugin's metrics.
type indexerMetrics struct {
	failOpen prometheus.Counter
	latency  prometheus.Histogram
}

func newIndexerMetrics(h scheduling.Handle) indexerMetrics {
	return indexerMetrics{
		failOpen: scheduling.Metric(h, telemetry.NewCounter("hermod_picker_indexer_fail_open_total", "Scoring cycles in which precise-prefix-cache-scorer got no answer from the indexer and scored every endpoint alike.")),
		latency:  scheduling.Metric(h, telemetry.NewHistogram("hermod_picker_indexer_score_seconds", "Latency of Score calls to hermod-indexer.", prometheus.ExponentialBuckets(50e-6, 2, 14))),
	}
}
