// Package prefix holds prefix-cache-scorer, the approximate prefix-cache
// scorer: it needs no tokenizer and no KV events. The prompt (for chat, the
// JSON of the messages) is cut into blocks of blockSizeTokens x 4
// characters whose chained hashes are looked up in an index of the blocks
// recently routed to each endpoint. score = consecutive matched blocks from
// block 0 / total blocks.
package prefix

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hermod/hermod/libs/giemetrics"
	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/libs/telemetry"
)

// Type is the registered plugin type.
const Type = "prefix-cache-scorer"

// Defaults.
const (
	DefaultBlockSizeTokens        = 16
	DefaultMaxPrefixBlocksToMatch = 256
	DefaultLRUCapacityPerServer   = 31250
	// CharsPerToken converts the token block size to characters.
	CharsPerToken = 4
)

func init() {
	scheduling.Register(scheduling.Registration{Type: Type, New: New})
}

// Params are prefix-cache-scorer's effective parameters.
type Params struct {
	// AutoTune takes the block size from the endpoints' reported
	// vllm:cache_config_info block_size and each endpoint's LRU capacity
	// from its num_gpu_blocks.
	AutoTune               bool `json:"autoTune"`
	BlockSizeTokens        int  `json:"blockSizeTokens"`
	MaxPrefixBlocksToMatch int  `json:"maxPrefixBlocksToMatch"`
	LRUCapacityPerServer   int  `json:"lruCapacityPerServer"`
	// The score's blend with the match's length (prefix-cache-scorer
	// only; see scoreMatch).
	MatchLengthWeight      float64 `json:"matchLengthWeight,omitempty"`
	MatchLengthScaleTokens int     `json:"matchLengthScaleTokens,omitempty"`
}

type wireParams struct {
	AutoTune               *bool `json:"autoTune"`
	BlockSizeTokens        *int  `json:"blockSizeTokens"`
	BlockSize              *int  `json:"blockSize"`
	MaxPrefixBlocksToMatch *int  `json:"maxPrefixBlocksToMatch"`
	LRUCapacityPerServer   *int  `json:"lruCapacityPerServer"`
}

// Plugin is the approximate prefix-cache scorer. It is a Scorer, a
// PrefixMatcher (no-hit-lru-scorer and deciders read its match) and a
// PreRequest hook that records the request's blocks for its targets.
type Plugin struct {
	scheduling.Named
	params  Params
	index   *Index
	key     scheduling.StateKey
	pool    sync.Pool
	metrics indexerMetrics
	// weight and scale blend the score with the match's length.
	weight float64
	scale  int
}

// indexerMetrics are GIE's prefix indexer metrics: the blocks the index
// holds, and per decision the share and the estimated bytes of the prompt
// its target held.
type indexerMetrics struct {
	size     prometheus.Gauge
	hitRatio prometheus.Histogram
	hitBytes prometheus.Histogram
}

func newIndexerMetrics(h scheduling.Handle) indexerMetrics {
	return indexerMetrics{
		size: scheduling.Metric(h, telemetry.NewGauge("inference_extension_prefix_indexer_size", "[ALPHA] Size of the prefix indexer.")),
		hitRatio: scheduling.Metric(h, telemetry.NewHistogram("inference_extension_prefix_indexer_hit_ratio",
			"[ALPHA] Ratio of prefix length matched to total prefix length in the cache lookup.", giemetrics.RatioBuckets)),
		hitBytes: scheduling.Metric(h, telemetry.NewHistogram("inference_extension_prefix_indexer_hit_bytes",
			"[ALPHA] Length of the prefix match in number of bytes in the cache lookup.", giemetrics.HitBytesBuckets)),
	}
}

// newIndexPlugin builds the index and matcher of prefix-cache-scorer and
// approx-prefix-cache-producer (typ). maxTokens, when set, bounds the
// match in tokens (upstream's maxPrefixTokensToMatch) where
// maxPrefixBlocksToMatch is not given.
func newIndexPlugin(typ, name string, w wireParams, maxTokens *int, h scheduling.Handle) (*Plugin, error) {
	p := Params{AutoTune: true, BlockSizeTokens: DefaultBlockSizeTokens, MaxPrefixBlocksToMatch: DefaultMaxPrefixBlocksToMatch, LRUCapacityPerServer: DefaultLRUCapacityPerServer}
	if w.BlockSize != nil {
		if w.BlockSizeTokens == nil {
			return nil, scheduling.ParamErrorf("blockSize", "is deprecated (a size in characters) and cannot be used alone; set blockSizeTokens (a size in tokens) instead")
		}
		h.Warn("parameters.blockSize is deprecated and ignored because blockSizeTokens is set")
	}
	if w.AutoTune != nil {
		p.AutoTune = *w.AutoTune
	}
	for _, f := range []struct {
		name string
		v    *int
		dst  *int
	}{{"blockSizeTokens", w.BlockSizeTokens, &p.BlockSizeTokens}, {"maxPrefixBlocksToMatch", w.MaxPrefixBlocksToMatch, &p.MaxPrefixBlocksToMatch}, {"lruCapacityPerServer", w.LRUCapacityPerServer, &p.LRUCapacityPerServer}} {
		if f.v == nil {
			continue
		}
		if *f.v < 1 {
			return nil, scheduling.ParamErrorf(f.name, "must be at least 1 (got %d)", *f.v)
		}
		*f.dst = *f.v
	}
	if (typ == ProducerType || typ == MultiClusterProducerType) && w.MaxPrefixBlocksToMatch == nil {
		tokens := DefaultMaxPrefixTokensToMatch
		if maxTokens != nil {
			if *maxTokens < 1 {
				return nil, scheduling.ParamErrorf("maxPrefixTokensToMatch", "must be at least 1 (got %d)", *maxTokens)
			}
			tokens = *maxTokens
		}
		p.MaxPrefixBlocksToMatch = (tokens + p.BlockSizeTokens - 1) / p.BlockSizeTokens
	}
	pl := &Plugin{Named: scheduling.Named{Type: typ, Name: name}, params: p, index: NewIndex(), key: scheduling.StateKey("prefix/" + name),
		metrics: newIndexerMetrics(h)}
	pl.pool.New = func() any { return &match{plugin: pl} }
	return pl, nil
}

// Parameters implements scheduling.ParameterReporter.
func (p *Plugin) Parameters() any { return p.params }

// Index returns the plugin's block index.
func (p *Plugin) Index() *Index { return p.index }

// match is the plugin's per-request state: the shared PrefixMatch plus the
// request's block hashes. It returns to the plugin's pool when the cycle
// ends.
type match struct {
	scheduling.PrefixMatch
	hashes  []uint64
	matched bool // PrefixMatch holds the index's answer for hashes
	plugin  *Plugin
}

// Release implements scheduling.Releaser.
func (m *match) Release() {
	m.Clear()
	m.hashes = m.hashes[:0]
	m.matched = false
	m.plugin.pool.Put(m)
}

// PrepareCycle implements scheduling.CyclePreparer: the prompt's blocks are
// cut and hashed before the scheduler's critical section (a long prompt
// takes tens of microseconds); only the lookup in the index, which must
// see the blocks of the decision just before it, stays inside.
func (p *Plugin) PrepareCycle(_ context.Context, cs *scheduling.CycleState, req *scheduling.Request, candidates []*scheduling.Endpoint) {
	p.hashed(cs, req, candidates)
}

// MatchPrefix implements scheduling.PrefixMatcher.
func (p *Plugin) MatchPrefix(_ context.Context, cs *scheduling.CycleState, req *scheduling.Request, candidates []*scheduling.Endpoint) *scheduling.PrefixMatch {
	return &p.match(cs, req, candidates).PrefixMatch
}

// hashed returns the request's match with its block hashes, computing
// them unless PrepareCycle already did.
func (p *Plugin) hashed(cs *scheduling.CycleState, req *scheduling.Request, candidates []*scheduling.Endpoint) *match {
	if m, ok := scheduling.ReadState[*match](cs, p.key); ok {
		return m
	}
	m := p.pool.Get().(*match)
	m.BlockSizeTokens = p.blockSize(candidates)
	m.hashes = Hashes(req.Model, req.PrefixText(), m.BlockSizeTokens*CharsPerToken, p.params.MaxPrefixBlocksToMatch, m.hashes[:0])
	m.TotalBlocks = len(m.hashes)
	cs.Write(p.key, m)
	return m
}

// match returns the request's match, looked up in the index once per
// cycle.
func (p *Plugin) match(cs *scheduling.CycleState, req *scheduling.Request, candidates []*scheduling.Endpoint) *match {
	m := p.hashed(cs, req, candidates)
	if !m.matched {
		p.index.Match(m.hashes, &m.PrefixMatch)
		m.matched = true
		cs.Write(scheduling.PrefixMatchKey, &m.PrefixMatch)
	}
	return m
}

// blockSize is the configured block size, or with autoTune the block size
// the first candidate reporting one uses.
func (p *Plugin) blockSize(candidates []*scheduling.Endpoint) int {
	if p.params.AutoTune {
		for _, e := range candidates {
			if e.Metrics != nil && e.Metrics.BlockSize > 0 {
				return e.Metrics.BlockSize
			}
		}
	}
	return p.params.BlockSizeTokens
}

// capacity is an endpoint's block capacity as its metrics report it
// (autoTune), 0 when they do not.
func (p *Plugin) capacity(e *scheduling.Endpoint) int {
	if p.params.AutoTune && e.Metrics != nil && e.Metrics.NumGPUBlocks > 0 {
		return e.Metrics.NumGPUBlocks
	}
	return 0
}

// Score implements scheduling.Scorer.
func (p *Plugin) Score(_ context.Context, cs *scheduling.CycleState, req *scheduling.Request, eps []*scheduling.Endpoint, scores []float64) {
	m := p.match(cs, req, eps)
	scoreMatch(&m.PrefixMatch, eps, scores, p.weight, p.scale)
}

// PreRequest implements scheduling.PreRequest: the request's blocks are
// now (about to be) cached on the primary target and the prefill target
// (recorded as effects, applied by ApplyEffect).
func (p *Plugin) PreRequest(_ context.Context, cs *scheduling.CycleState, req *scheduling.Request, res *scheduling.Result) {
	m := p.match(cs, req, res.Primary.Endpoints)
	if len(m.hashes) == 0 {
		return
	}
	if t, ok := res.Primary.Target(); ok && m.TotalBlocks > 0 {
		held := m.BlocksOf(t.Endpoint)
		p.metrics.hitRatio.Observe(float64(held) / float64(m.TotalBlocks))
		p.metrics.hitBytes.Observe(float64(held * m.BlockSizeTokens * CharsPerToken))
	}
	for _, pr := range []*scheduling.ProfileResult{res.Primary, res.Prefill} {
		if t, ok := pr.Target(); ok {
			name := [1]string{t.Endpoint.Name}
			res.RecordEffect(p, name[:], m.hashes, int64(p.capacity(t.Endpoint)))
		}
	}
}

// ApplyEffect implements scheduling.Projection: the effect's endpoints hold
// its blocks as of the decision's stamp.
func (p *Plugin) ApplyEffect(decisionID uint64, at time.Time, e *scheduling.Effect) {
	st := scheduling.StampOf(decisionID, at)
	for _, name := range e.Endpoints {
		p.index.Add(name, int(e.Capacity), p.params.LRUCapacityPerServer, e.Blocks, st)
	}
	p.metrics.size.Set(float64(p.index.Entries()))
}

// InheritState implements scheduling.StateInheritor: the index carries over
// when the blocks are cut and hashed the same way.
func (p *Plugin) InheritState(prev scheduling.Plugin) bool {
	q, ok := prev.(*Plugin)
	if !ok || q.params.AutoTune != p.params.AutoTune || q.params.BlockSizeTokens != p.params.BlockSizeTokens ||
		q.params.MaxPrefixBlocksToMatch != p.params.MaxPrefixBlocksToMatch {
		return false
	}
	p.index = q.index
	return true
}

// EndpointRemoved implements scheduling.EndpointRemover: the endpoint's
// blocks leave the index.
func (p *Plugin) EndpointRemoved(name string) { p.index.RemoveEndpoint(name) }
