// Package nohitlru holds no-hit-lru-scorer, which spreads cold requests
// (no endpoint holds any block of their prefix) across endpoints so that KV
// caches grow evenly.
package nohitlru

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hermod/hermod/libs/plugins/prefix"
	"github.com/hermod/hermod/libs/scheduling"
)

// Type is the registered plugin type.
const Type = "no-hit-lru-scorer"

// Defaults.
const (
	DefaultPrefixPlugin = prefix.Type
	DefaultLRUSize      = 1024
	warmScore           = 0.5
)

func init() {
	scheduling.Register(scheduling.Registration{Type: Type, New: New})
}

// Params are no-hit-lru-scorer's parameters.
type Params struct {
	PrefixPluginType string `json:"prefixPluginType"`
	PrefixPluginName string `json:"prefixPluginName"`
	LRUSize          int    `json:"lruSize"`
	// PrefixMatchInfoProducerName names the producer whose match is read
	// (llm-d router v0.9+); set, it replaces prefixPluginName and
	// prefixPluginType.
	PrefixMatchInfoProducerName string `json:"prefixMatchInfoProducerName,omitempty"`
}

// Scorer scores warm requests (some candidate holds at least one block of
// the prompt) 0.5 everywhere. For a cold request it orders the candidates:
// first those not tracked (never sent a cold request, or forgotten), in
// candidate order; then the others from least to most recently sent one.
// Rank r of N scores 1 - r/(N-1) (N = 1: 1.0). The endpoints that serve a
// cold request (primary and prefill targets) are stamped with the
// decision's stamp (time, id); an endpoint keeps its newest stamp, and only
// the lruSize newest are tracked. Recency is thus the decisions' order, not
// the order their effects arrive in: every replica ranks alike.
type Scorer struct {
	scheduling.Named
	params   Params
	prefixes []scheduling.PrefixMatcher
	state    *lruState
}

// lruState is the newest cold-request stamp per endpoint; a reloaded
// configuration's scorer may share it with its predecessor.
type lruState struct {
	mu     sync.Mutex
	size   int
	stamps map[string]recency
}

// recency is when an endpoint was last sent a cold request: the decision's
// stamp, then the endpoint's place among the decision's targets (a prefill
// target counts as sent after the primary one).
type recency struct {
	st  scheduling.Stamp
	pos int
}

func (r recency) compare(o recency) int {
	if c := r.st.Compare(o.st); c != 0 {
		return c
	}
	return cmp.Compare(r.pos, o.pos)
}

// New builds a no-hit-lru-scorer. It reads the prefix match of the plugin
// prefixPluginName names. Upstream does not require that plugin (it reads
// whatever prefix match the endpoints carry), so neither does Hermod: when
// it is not declared earlier, the prefix plugins declared earlier stand in
// for it, and with none every request counts as cold; either way a warning
// says so.
func New(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
	p := Params{PrefixPluginType: DefaultPrefixPlugin, PrefixPluginName: DefaultPrefixPlugin, LRUSize: DefaultLRUSize}
	if err := scheduling.DecodeParameters(raw, &p, h); err != nil {
		return nil, err
	}
	if p.LRUSize < 1 {
		return nil, scheduling.ParamErrorf("lruSize", "must be at least 1 (got %d)", p.LRUSize)
	}
	prefixes, err := prefixMatchers(p, h)
	if err != nil {
		return nil, err
	}
	return &Scorer{
		Named:    scheduling.Named{Type: Type, Name: name},
		params:   p,
		prefixes: prefixes,
		state:    &lruState{size: p.LRUSize, stamps: map[string]recency{}},
	}, nil
}

// prefixMatchers finds the prefix match the scorer reads: the named
// plugin's, else that of every prefix plugin declared earlier.
func prefixMatchers(p Params, h scheduling.Handle) ([]scheduling.PrefixMatcher, error) {
	if name := p.PrefixMatchInfoProducerName; name != "" {
		pp, err := h.Plugin(name)
		if err != nil {
			return nil, scheduling.ParamErrorf("prefixMatchInfoProducerName", "%v", err)
		}
		m, ok := pp.(scheduling.PrefixMatcher)
		if !ok {
			return nil, scheduling.ParamErrorf("prefixMatchInfoProducerName", "plugin %q (type %s) produces no prefix match", name, pp.TypedName().Type)
		}
		return []scheduling.PrefixMatcher{m}, nil
	}
	if pp, err := h.Plugin(p.PrefixPluginName); err == nil {
		m, ok := pp.(scheduling.PrefixMatcher)
		if !ok {
			return nil, scheduling.ParamErrorf("prefixPluginName", "plugin %q (type %s) is not a prefix-cache plugin", p.PrefixPluginName, pp.TypedName().Type)
		}
		if pp.TypedName().Type != p.PrefixPluginType {
			h.Warn(fmt.Sprintf("no-hit-lru-scorer: plugin %q has type %s, not prefixPluginType %s; its prefix match is used", p.PrefixPluginName, pp.TypedName().Type, p.PrefixPluginType))
		}
		return []scheduling.PrefixMatcher{m}, nil
	}
	var found []scheduling.PrefixMatcher
	var names []string
	for _, pp := range h.Earlier() {
		if m, ok := pp.(scheduling.PrefixMatcher); ok {
			found = append(found, m)
			names = append(names, pp.TypedName().String())
		}
	}
	if len(found) == 0 {
		h.Warn(fmt.Sprintf("no-hit-lru-scorer: no prefix plugin %q (or any other) is declared before it: every request counts as cold and is spread by recency", p.PrefixPluginName))
		return nil, nil
	}
	h.Warn(fmt.Sprintf("no-hit-lru-scorer: no plugin %q is declared before it; the prefix match of %s is used instead", p.PrefixPluginName, strings.Join(names, ", ")))
	return found, nil
}

// warmFor reports whether some of eps hold at least one block of req's
// prompt by any of the scorer's prefix matches.
func (s *Scorer) warmFor(ctx context.Context, cs *scheduling.CycleState, req *scheduling.Request, eps []*scheduling.Endpoint) bool {
	for _, m := range s.prefixes {
		if warm(m.MatchPrefix(ctx, cs, req, eps), eps) {
			return true
		}
	}
	return false
}

// Parameters implements scheduling.ParameterReporter.
func (s *Scorer) Parameters() any { return s.params }

// Score implements scheduling.Scorer.
func (s *Scorer) Score(ctx context.Context, cs *scheduling.CycleState, req *scheduling.Request, eps []*scheduling.Endpoint, scores []float64) {
	if s.warmFor(ctx, cs, req, eps) {
		for i := range scores {
			scores[i] = warmScore
		}
		return
	}
	n := len(eps)
	if n == 1 {
		scores[0] = 1
		return
	}
	// Untracked endpoints have the zero stamp, older than any: one sort by
	// (stamp, candidate index) puts them first in candidate order, then the
	// tracked ones oldest first.
	keys := cs.ScratchUint64s(3 * n)
	st := s.state
	st.mu.Lock()
	for i, e := range eps {
		r := st.stamps[e.Name]
		keys[3*i], keys[3*i+1], keys[3*i+2] = uint64(r.st.Nanos), r.st.ID, uint64(r.pos)
	}
	st.mu.Unlock()
	order := cs.ScratchIndices(n)
	slices.SortFunc(order, func(a, b int) int {
		ka, kb := keys[3*a:3*a+3], keys[3*b:3*b+3]
		if c := cmp.Compare(int64(ka[0]), int64(kb[0])); c != 0 {
			return c
		}
		if c := cmp.Compare(ka[1], kb[1]); c != 0 {
			return c
		}
		if c := cmp.Compare(ka[2], kb[2]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	denom := float64(n - 1)
	for rank, i := range order {
		scores[i] = 1 - float64(rank)/denom
	}
}

// ColdRanks returns the score each of the named endpoints would get for a
// cold request if they were the candidates, in that order.
func (s *Scorer) ColdRanks(names []string) map[string]float64 {
	out := make(map[string]float64, len(names))
	if len(names) == 1 {
		out[names[0]] = 1
	}
	if len(names) < 2 {
		return out
	}
	st := s.state
	st.mu.Lock()
	stamps := make([]recency, len(names))
	for i, n := range names {
		stamps[i] = st.stamps[n]
	}
	st.mu.Unlock()
	order := make([]int, len(names))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return stamps[a].compare(stamps[b]) })
	for rank, i := range order {
		out[names[i]] = 1 - float64(rank)/float64(len(names)-1)
	}
	return out
}

// warm reports whether some candidate holds at least one block.
func warm(m *scheduling.PrefixMatch, eps []*scheduling.Endpoint) bool {
	if !m.Hit() {
		return false
	}
	for _, e := range eps {
		if m.BlocksOf(e) > 0 {
			return true
		}
	}
	return false
}

// PreRequest implements scheduling.PreRequest: a cold request's targets
// become the most recently used (recorded as an effect, applied by
// ApplyEffect).
func (s *Scorer) PreRequest(ctx context.Context, cs *scheduling.CycleState, req *scheduling.Request, res *scheduling.Result) {
	if s.warmFor(ctx, cs, req, res.Primary.Endpoints) {
		return
	}
	var buf [2]string
	res.RecordEffect(s, res.ServingNames(buf[:0]), nil, 0)
}

// ApplyEffect implements scheduling.Projection: the effect's endpoints were
// sent a cold request at the decision's stamp.
func (s *Scorer) ApplyEffect(decisionID uint64, at time.Time, e *scheduling.Effect) {
	st := scheduling.StampOf(decisionID, at)
	for i, name := range e.Endpoints {
		s.touch(name, recency{st, i})
	}
}

// InheritState implements scheduling.StateInheritor: the recency carries
// over, trimmed to this scorer's lruSize.
func (s *Scorer) InheritState(prev scheduling.Plugin) bool {
	p, ok := prev.(*Scorer)
	if !ok {
		return false
	}
	st := p.state
	st.mu.Lock()
	st.size = s.params.LRUSize
	st.trim()
	st.mu.Unlock()
	s.state = st
	return true
}

// EndpointRemoved implements scheduling.EndpointRemover.
func (s *Scorer) EndpointRemoved(name string) {
	st := s.state
	st.mu.Lock()
	defer st.mu.Unlock()
	delete(st.stamps, name)
}

// Touch records that endpoint was sent a cold request by the decision
// stamped st; an older stamp than the one it has changes nothing.
func (s *Scorer) Touch(endpoint string, stamp scheduling.Stamp) {
	s.touch(endpoint, recency{st: stamp})
}

func (s *Scorer) touch(endpoint string, r recency) {
	st := s.state
	st.mu.Lock()
	defer st.mu.Unlock()
	if cur, ok := st.stamps[endpoint]; ok && cur.compare(r) >= 0 {
		return
	}
	st.stamps[endpoint] = r
	st.trim()
}

// trim forgets the endpoints with the oldest stamps beyond the size. The
// caller holds st.mu.
func (st *lruState) trim() {
	for len(st.stamps) > st.size {
		var oldest string
		var or recency
		first := true
		for name, r := range st.stamps {
			if c := r.compare(or); first || c < 0 || (c == 0 && name < oldest) {
				oldest, or, first = name, r, false
			}
		}
		delete(st.stamps, oldest)
	}
}
