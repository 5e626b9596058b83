// Package p2psource is the llm-d router's p2p-source-producer: it names,
// in x-kv-cache-source-host-port, a peer that holds the request's prompt
// prefix in its KV cache, so that the routing sidecar in front of the
// chosen pod pulls those blocks over the P2P connector instead of
// computing them again.
//
// Before scheduling, among the endpoints within one block of the longest
// cached prefix (by the prefix match of a prefix-cache producer), it
// samples one weighted by 1/(1+waiting requests), the request id's hash as
// the sampling coordinate, so that the pulls of a widely cached prefix do
// not all go to one replica. After scheduling it sets the header when that
// peer caches at least minCachedTokenDelta tokens more than the pod that
// computes the prompt (the prefill profile's target, else the primary's).
// A client's copy of the header is removed at every way in (a reserved
// header).
package p2psource

import (
	"context"
	"encoding/json"
	"math"

	"github.com/cespare/xxhash/v2"

	"github.com/hermod/hermod/libs/reservedheaders"
	"github.com/hermod/hermod/libs/scheduling"
)

// Type is the plugin type.
const Type = "p2p-source-producer"

// Header is the header the plugin sets.
const Header = reservedheaders.KVCacheSourceHostPort

// Defaults.
const (
	DefaultMinCachedTokenDelta = 1
	DefaultPrefillProfileName  = "prefill"
)

func init() {
	scheduling.Register(scheduling.Registration{Type: Type, New: New})
}

// Params are the plugin's parameters.
type Params struct {
	// PrefixMatchInfoProducerName names the prefix-cache producer whose
	// match is read ("": the first one declared before this plugin).
	PrefixMatchInfoProducerName string `json:"prefixMatchInfoProducerName,omitempty"`
	MinCachedTokenDelta         int    `json:"minCachedTokenDelta"`
	PrefillProfileName          string `json:"prefillProfileName"`
}

// Producer is p2p-source-producer.
type Producer struct {
	scheduling.Named
	params Params
	prefix scheduling.PrefixMatcher
	key    scheduling.StateKey
}

// source is the peer chosen before scheduling.
type source struct {
	endpoint *scheduling.Endpoint
	cached   int
	match    *scheduling.PrefixMatch
}

// New builds the plugin.
func New(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
	p := Params{MinCachedTokenDelta: DefaultMinCachedTokenDelta, PrefillProfileName: DefaultPrefillProfileName}
	if err := scheduling.DecodeParameters(raw, &p, h); err != nil {
		return nil, err
	}
	if p.MinCachedTokenDelta < 1 {
		return nil, scheduling.ParamErrorf("minCachedTokenDelta", "must be at least 1 (got %d)", p.MinCachedTokenDelta)
	}
	m, err := scheduling.PrefixMatcherFor(h, p.PrefixMatchInfoProducerName)
	if err != nil {
		return nil, err
	}
	if m == nil {
		return nil, scheduling.ParamErrorf("prefixMatchInfoProducerName", "no prefix-cache producer is declared before %s: declare approx-prefix-cache-producer or precise-prefix-cache-producer first", name)
	}
	return &Producer{Named: scheduling.Named{Type: Type, Name: name}, params: p, prefix: m,
		key: scheduling.StateKey("hermod.p2p-source." + name)}, nil
}

// Parameters implements scheduling.ParameterReporter.
func (p *Producer) Parameters() any { return p.params }

// PrepareCycle implements scheduling.CyclePreparer: it chooses the source.
func (p *Producer) PrepareCycle(ctx context.Context, cs *scheduling.CycleState, req *scheduling.Request, candidates []*scheduling.Endpoint) {
	m := p.prefix.MatchPrefix(ctx, cs, req, candidates)
	if m.Len() == 0 {
		return
	}
	if e, cached := Choose(m, candidates, xxhash.Sum64String(req.ID)); e != nil {
		cs.Write(p.key, source{endpoint: e, cached: cached, match: m})
	}
}

// PreRequest implements scheduling.PreRequest: it names the source when it
// out-caches the computing pod by minCachedTokenDelta tokens.
func (p *Producer) PreRequest(_ context.Context, cs *scheduling.CycleState, _ *scheduling.Request, res *scheduling.Result) {
	v, ok := cs.Read(p.key)
	if !ok {
		return
	}
	src := v.(source)
	computing := res.Primary
	for _, pr := range res.Profiles {
		if pr.Profile == p.params.PrefillProfileName && pr.Err == nil {
			computing = pr
			break
		}
	}
	t, ok := computing.Target()
	if !ok || t.Endpoint == nil || t.Endpoint.Name == src.endpoint.Name {
		return
	}
	if src.cached-src.match.CachedTokens(t.Endpoint.Name) >= p.params.MinCachedTokenDelta {
		res.SetHeader(Header, src.endpoint.HostPort())
	}
}

// Choose samples the source among the candidates within one block of the
// longest cached prefix, weighted by 1/(1+waiting requests), at coord
// (uniform over uint64); it returns the endpoint and the tokens it caches
// (nil when none caches any).
func Choose(m *scheduling.PrefixMatch, candidates []*scheduling.Endpoint, coord uint64) (*scheduling.Endpoint, int) {
	best := 0
	for _, e := range candidates {
		best = max(best, m.BlocksOf(e))
	}
	if best == 0 {
		return nil, 0
	}
	band := func(e *scheduling.Endpoint) bool { b := m.BlocksOf(e); return b > 0 && b >= best-1 }
	weight := func(e *scheduling.Endpoint) float64 {
		waiting := 0
		if e.Metrics != nil {
			waiting = max(e.Metrics.WaitingRequests, 0)
		}
		return 1 / float64(1+waiting)
	}
	total := 0.0
	for _, e := range candidates {
		if band(e) {
			total += weight(e)
		}
	}
	at := float64(coord) / math.MaxUint64 * total
	var last *scheduling.Endpoint
	for _, e := range candidates {
		if !band(e) {
			continue
		}
		last = e
		if at -= weight(e); at < 0 {
			break
		}
	}
	return last, m.BlocksOf(last) * m.BlockSizeTokens
}
