// Package nohitlru holds no-hit-lru-scorer, which spreads cold requests
// (no endpoint holds any block of their prefix) across endpoints so that KV
// caches grow evenly.
package nohitlru

import (
	"cmp"
	"container/list"
	"context"
	"encoding/json"
	"slices"
	"sync"
	"time"

	"github.com/hermod/hermod/libs/scheduling"
)

// Type is the registered plugin type.
const Type = "no-hit-lru-scorer"

// Defaults.
const (
	DefaultPrefixPlugin = "prefix-cache-scorer"
	DefaultLRUSize      = 1024
	warmScore           = 0.5
	// idxBits is how many low bits of a sort key hold the candidate index.
	idxBits = 20
)

func init() {
	scheduling.Register(scheduling.Registration{Type: Type, New: New})
}

// Params are no-hit-lru-scorer's parameters.
type Params struct {
	PrefixPluginType string `json:"prefixPluginType"`
	PrefixPluginName string `json:"prefixPluginName"`
	LRUSize          int    `json:"lruSize"`
}

// Scorer scores warm requests (some candidate holds at least one block of
// the prompt) 0.5 everywhere. For a cold request it orders the candidates:
// first those not in the LRU (never sent a cold request, or forgotten), in
// candidate order; then the others from least to most recently sent one.
// Rank r of N scores 1 - r/(N-1) (N = 1: 1.0). The endpoints that serve a
// cold request (primary and prefill targets) move to the front of the LRU,
// which holds the lruSize most recent.
type Scorer struct {
	scheduling.Named
	params Params
	prefix scheduling.PrefixMatcher
	state  *lruState
}

// lruState is the recency of cold requests per endpoint; a reloaded
// configuration's scorer may share it with its predecessor.
type lruState struct {
	mu    sync.Mutex
	size  int
	lru   *list.List // of *tracked, most recent at the front
	byKey map[string]*list.Element
	seq   uint64
}

type tracked struct {
	name string
	seq  uint64
}

// New builds a no-hit-lru-scorer; its prefix plugin must be declared
// earlier.
func New(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
	p := Params{PrefixPluginType: DefaultPrefixPlugin, PrefixPluginName: DefaultPrefixPlugin, LRUSize: DefaultLRUSize}
	if err := scheduling.DecodeParameters(raw, &p, h); err != nil {
		return nil, err
	}
	if p.LRUSize < 1 {
		return nil, scheduling.ParamErrorf("lruSize", "must be at least 1 (got %d)", p.LRUSize)
	}
	pp, err := h.Plugin(p.PrefixPluginName)
	if err != nil {
		return nil, scheduling.ParamErrorf("prefixPluginName", "no-hit-lru-scorer needs its prefix plugin declared before it: %v", err)
	}
	if pp.TypedName().Type != p.PrefixPluginType {
		return nil, scheduling.ParamErrorf("prefixPluginType", "plugin %q has type %s, not %s", p.PrefixPluginName, pp.TypedName().Type, p.PrefixPluginType)
	}
	m, ok := pp.(scheduling.PrefixMatcher)
	if !ok {
		return nil, scheduling.ParamErrorf("prefixPluginName", "plugin %q (type %s) is not a prefix-cache plugin", p.PrefixPluginName, p.PrefixPluginType)
	}
	return &Scorer{
		Named:  scheduling.Named{Type: Type, Name: name},
		params: p,
		prefix: m,
		state:  &lruState{size: p.LRUSize, lru: list.New(), byKey: map[string]*list.Element{}},
	}, nil
}

// Parameters implements scheduling.ParameterReporter.
func (s *Scorer) Parameters() any { return s.params }

// Score implements scheduling.Scorer.
func (s *Scorer) Score(ctx context.Context, cs *scheduling.CycleState, req *scheduling.Request, eps []*scheduling.Endpoint, scores []float64) {
	if warm(s.prefix.MatchPrefix(ctx, cs, req, eps), eps) {
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
	// Untracked endpoints take the first ranks in candidate order; tracked
	// ones follow by ascending sequence (oldest cold request first).
	// Untracked endpoints have sequence 0, so one stable sort by sequence
	// orders both.
	denom := float64(n - 1)
	st := s.state
	st.mu.Lock()
	if n < 1<<idxBits {
		// Pack (seq << idxBits | index): a plain integer sort is stable
		// here because the index breaks ties.
		keys := cs.ScratchUint64s(n)
		for i, e := range eps {
			keys[i] = st.seqOf(e.Name)<<idxBits | uint64(i)
		}
		st.mu.Unlock()
		slices.Sort(keys)
		for rank, k := range keys {
			scores[k&(1<<idxBits-1)] = 1 - float64(rank)/denom
		}
		return
	}
	seqs := cs.ScratchUint64s(n)
	for i, e := range eps {
		seqs[i] = st.seqOf(e.Name)
	}
	st.mu.Unlock()
	order := cs.ScratchInts(n)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(seqs[a], seqs[b]) })
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
	seqs := make([]uint64, len(names))
	for i, n := range names {
		seqs[i] = st.seqOf(n)
	}
	st.mu.Unlock()
	order := make([]int, len(names))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(seqs[a], seqs[b]) })
	for rank, i := range order {
		out[names[i]] = 1 - float64(rank)/float64(len(names)-1)
	}
	return out
}

// seqOf is an endpoint's last cold-request sequence, 0 if untracked. The
// caller holds st.mu.
func (st *lruState) seqOf(name string) uint64 {
	if el, ok := st.byKey[name]; ok {
		return el.Value.(*tracked).seq
	}
	return 0
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
	if warm(s.prefix.MatchPrefix(ctx, cs, req, res.Primary.Endpoints), res.Primary.Endpoints) {
		return
	}
	var buf [2]string
	names := buf[:0]
	for _, pr := range []*scheduling.ProfileResult{res.Primary, res.Prefill} {
		if t, ok := pr.Target(); ok {
			names = append(names, t.Endpoint.Name)
		}
	}
	res.RecordEffect(s, names, nil, 0)
}

// ApplyEffect implements scheduling.Projection: the effect's endpoints were
// just sent a cold request.
func (s *Scorer) ApplyEffect(_ uint64, _ time.Time, e *scheduling.Effect) {
	for _, name := range e.Endpoints {
		s.Touch(name)
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
	if el, ok := st.byKey[name]; ok {
		st.lru.Remove(el)
		delete(st.byKey, name)
	}
}

// Touch records that endpoint was just sent a cold request.
func (s *Scorer) Touch(endpoint string) {
	st := s.state
	st.mu.Lock()
	defer st.mu.Unlock()
	st.seq++
	if el, ok := st.byKey[endpoint]; ok {
		el.Value.(*tracked).seq = st.seq
		st.lru.MoveToFront(el)
		return
	}
	st.byKey[endpoint] = st.lru.PushFront(&tracked{name: endpoint, seq: st.seq})
	st.trim()
}

// trim forgets the least recent endpoints beyond the size. The caller holds
// st.mu.
func (st *lruState) trim() {
	for st.lru.Len() > st.size {
		old := st.lru.Remove(st.lru.Back()).(*tracked)
		delete(st.byKey, old.name)
	}
}
