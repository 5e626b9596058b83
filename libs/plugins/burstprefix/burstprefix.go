// Package burstprefix is the llm-d router's burst-prefix-cache-producer:
// it co-locates bursts of requests that share a prompt (the n samples of
// one prompt in an RL rollout step, say), which arrive while every
// replica's cache is still cold, so that the shared prefix is prefilled
// once instead of on every replica load balancing would spread them over.
//
// Requests arriving within a window (windowDurationMs) wait for it to
// close before they are scheduled; the window's requests are then placed
// jointly (Plan.Assign) and each gets a prefix match that is full on the
// replica it is steered to and empty elsewhere, which prefix-cache-scorer
// (prefixMatchInfoProducerName: this plugin) scores. A request that shares
// nothing with the window's others gains no affinity, and other scorers
// decide it.
package burstprefix

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hermod/hermod/libs/plugins/prefix"
	"github.com/hermod/hermod/libs/scheduling"
)

// Type is the plugin type.
const Type = "burst-prefix-cache-producer"

// Defaults and bounds of the parameters (upstream's).
const (
	DefaultWindowDurationMs = 100
	MaxWindowDurationMs     = 10000
	DefaultBlockSizeTokens  = 64
	DefaultMaxBatchSize     = 1000
	// DefaultMaxPrefixBlocks caps the blocks of a prompt's key when
	// maxPrefixTokensToMatch is 0: prompts equal up to this many blocks
	// are one group.
	DefaultMaxPrefixBlocks = 2048
	// WarnWindowDurationMs is the window above which the plugin warns
	// that callers' pick deadlines must cover it.
	WarnWindowDurationMs = 1000
	// unlimited is the -1 of maxPerReplica and maxBatchSize.
	unlimited = -1
)

func init() {
	scheduling.Register(scheduling.Registration{Type: Type, New: New})
}

// Params are the plugin's parameters.
type Params struct {
	WindowDurationMs       int       `json:"windowDurationMs"`
	MaxPerReplica          int       `json:"maxPerReplica"`
	BlockSizeTokens        int       `json:"blockSizeTokens"`
	MaxPrefixTokensToMatch int       `json:"maxPrefixTokensToMatch"`
	MinColocateBlocks      int       `json:"minColocateBlocks"`
	MaxBatchSize           int       `json:"maxBatchSize"`
	BalanceBy              BalanceBy `json:"balanceBy"`
}

// Producer is burst-prefix-cache-producer.
type Producer struct {
	scheduling.Named
	params    Params
	plan      Plan
	window    time.Duration
	maxBlocks int
	key       scheduling.StateKey
	metrics   *metrics

	mu   sync.Mutex
	open *window // the window requests join; nil between windows
}

// window is one batch of requests.
type window struct {
	members []Member
	assign  []string      // set when the window closes
	done    chan struct{} // closed when assign is set
}

type metrics struct {
	windowSize *prometheus.HistogramVec
	requests   *prometheus.CounterVec
}

// New builds the plugin.
func New(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
	p := Params{WindowDurationMs: DefaultWindowDurationMs, MaxPerReplica: unlimited, BlockSizeTokens: DefaultBlockSizeTokens,
		MaxBatchSize: DefaultMaxBatchSize, BalanceBy: BalanceRequests}
	if err := scheduling.DecodeParameters(raw, &p, h); err != nil {
		return nil, err
	}
	switch {
	case p.WindowDurationMs < 1 || p.WindowDurationMs > MaxWindowDurationMs:
		return nil, scheduling.ParamErrorf("windowDurationMs", "must be in 1..%d (got %d): every request waits up to the window", MaxWindowDurationMs, p.WindowDurationMs)
	case p.MaxPerReplica != unlimited && p.MaxPerReplica < 1:
		return nil, scheduling.ParamErrorf("maxPerReplica", "must be -1 (unlimited) or at least 1 (got %d)", p.MaxPerReplica)
	case p.BlockSizeTokens < 1:
		return nil, scheduling.ParamErrorf("blockSizeTokens", "must be positive (got %d)", p.BlockSizeTokens)
	case p.MaxPrefixTokensToMatch < 0:
		return nil, scheduling.ParamErrorf("maxPrefixTokensToMatch", "must not be negative (got %d)", p.MaxPrefixTokensToMatch)
	case p.MaxPrefixTokensToMatch > 0 && p.MaxPrefixTokensToMatch < p.BlockSizeTokens:
		return nil, scheduling.ParamErrorf("maxPrefixTokensToMatch", "must be 0 or at least blockSizeTokens (%d), got %d: a smaller value matches no block", p.BlockSizeTokens, p.MaxPrefixTokensToMatch)
	case p.MinColocateBlocks < 0:
		return nil, scheduling.ParamErrorf("minColocateBlocks", "must not be negative (got %d)", p.MinColocateBlocks)
	case p.MaxBatchSize != unlimited && p.MaxBatchSize < 1:
		return nil, scheduling.ParamErrorf("maxBatchSize", "must be -1 (unlimited) or at least 1 (got %d)", p.MaxBatchSize)
	case p.BalanceBy != BalanceRequests && p.BalanceBy != BalanceTokens:
		return nil, scheduling.ParamErrorf("balanceBy", "must be %q or %q (got %q)", BalanceRequests, BalanceTokens, p.BalanceBy)
	}
	if p.WindowDurationMs > WarnWindowDurationMs {
		h.Warn(fmt.Sprintf("parameters.windowDurationMs: every request waits up to %d ms for its window; the gateway's --pick-timeout (2s by default) and ext_proc's must exceed it", p.WindowDurationMs))
	}
	maxBlocks := DefaultMaxPrefixBlocks
	if p.MaxPrefixTokensToMatch > 0 {
		maxBlocks = p.MaxPrefixTokensToMatch / p.BlockSizeTokens
	}
	return &Producer{
		Named:     scheduling.Named{Type: Type, Name: name},
		params:    p,
		plan:      Plan{MaxPerReplica: p.MaxPerReplica, MinColocateBlocks: p.MinColocateBlocks, BalanceBy: p.BalanceBy},
		window:    time.Duration(p.WindowDurationMs) * time.Millisecond,
		maxBlocks: maxBlocks,
		key:       scheduling.StateKey("hermod.burst-prefix." + name),
		metrics:   newMetrics(h),
	}, nil
}

func newMetrics(h scheduling.Handle) *metrics {
	return &metrics{
		windowSize: scheduling.Metric(h, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "hermod_burst_prefix_window_requests",
			Help:    "Requests placed together per window of burst-prefix-cache-producer.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 11),
		}, []string{"plugin_name"})),
		requests: scheduling.Metric(h, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hermod_burst_prefix_requests_total",
			Help: "Requests seen by burst-prefix-cache-producer, by outcome: steered (an affinity to one replica), unsteered (no prefix shared in the window), batch_full (the window held maxBatchSize requests), canceled (the request ended while its window was open).",
		}, []string{"plugin_name", "outcome"})),
	}
}

// Parameters implements scheduling.ParameterReporter.
func (p *Producer) Parameters() any { return p.params }

// PrepareCycle implements scheduling.CyclePreparer: the request joins the
// open window (opening one if none is) and waits for it to close, outside
// the scheduler's critical section, so that the window fills while its
// requests wait.
func (p *Producer) PrepareCycle(ctx context.Context, cs *scheduling.CycleState, req *scheduling.Request, candidates []*scheduling.Endpoint) {
	hashes := prefix.Hashes(req.Model, req.PrefixText(), p.params.BlockSizeTokens*prefix.CharsPerToken, p.maxBlocks, nil)
	m := Member{Hashes: hashes, Candidates: make([]string, len(candidates)), Load: make(map[string]int, len(candidates))}
	for i, e := range candidates {
		m.Candidates[i] = e.Name
		if e.Metrics != nil {
			m.Load[e.Name] = e.Metrics.WaitingRequests + e.Metrics.RunningRequests
		}
	}
	w, index, ok := p.join(m)
	if !ok {
		p.metrics.requests.WithLabelValues(p.Name, "batch_full").Inc()
		return
	}
	select {
	case <-w.done:
	case <-ctx.Done():
		p.metrics.requests.WithLabelValues(p.Name, "canceled").Inc()
		return
	}
	outcome := "unsteered"
	if target := w.assign[index]; target != "" {
		outcome = "steered"
		match := &scheduling.PrefixMatch{BlockSizeTokens: p.params.BlockSizeTokens, TotalBlocks: len(hashes)}
		match.Set(target, scheduling.NameHash(target), len(hashes))
		cs.Write(p.key, match)
	}
	p.metrics.requests.WithLabelValues(p.Name, outcome).Inc()
}

// join adds m to the open window, opening one that closes after the
// window duration when none is open. It fails when the window is full.
func (p *Producer) join(m Member) (*window, int, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	w := p.open
	if w == nil {
		w = &window{done: make(chan struct{})}
		p.open = w
		time.AfterFunc(p.window, func() { p.close(w) })
	}
	if p.params.MaxBatchSize != unlimited && len(w.members) >= p.params.MaxBatchSize {
		return nil, 0, false
	}
	w.members = append(w.members, m)
	return w, len(w.members) - 1, true
}

// close seals w, places its members and wakes them.
func (p *Producer) close(w *window) {
	p.mu.Lock()
	if p.open == w {
		p.open = nil
	}
	p.mu.Unlock()
	// No request joins w now: its members are read without the lock.
	w.assign = p.plan.Assign(w.members)
	p.metrics.windowSize.WithLabelValues(p.Name).Observe(float64(len(w.members)))
	close(w.done)
}

// MatchPrefix implements scheduling.PrefixMatcher: the whole prompt on the
// replica the request's window steered it to, nothing elsewhere (nil when
// it gained no affinity).
func (p *Producer) MatchPrefix(_ context.Context, cs *scheduling.CycleState, _ *scheduling.Request, _ []*scheduling.Endpoint) *scheduling.PrefixMatch {
	m, _ := scheduling.ReadState[*scheduling.PrefixMatch](cs, p.key)
	return m
}
