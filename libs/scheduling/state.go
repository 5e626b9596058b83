package scheduling

import (
	"context"
	"math/rand/v2"
	"time"
)

// StateKey names a datum in a CycleState. Plugins key what they share by
// their instance name, or by a constant of the package defining the datum.
type StateKey string

// CycleState carries data between the plugins of one scheduling cycle (one
// request). It is not safe for concurrent use; a cycle runs its plugins one
// after another.
type CycleState struct {
	entries []stateEntry
	rng     *rand.Rand
	ints    []int
	u64s    []uint64
	f64s    []float64
	bytes   []byte
	// unlock and lock release and take the scheduler's critical section
	// around Unlocked (nil outside a scheduler's decision).
	unlock, lock func()
}

// Unlocked runs f outside the scheduler's critical section: a plugin
// that waits on the network (valkey-least-request-picker's atomic pick)
// does so while other decisions go on, instead of holding every Pick of
// the pool behind its round trip. Other decisions may change plugin
// state meanwhile, as another replica's would: f must touch only what it
// owns and the cycle's own state, and not the cycle's randomness.
func (c *CycleState) Unlocked(f func()) {
	if c.unlock == nil {
		f()
		return
	}
	c.unlock()
	defer c.lock()
	f()
}

type stateEntry struct {
	key StateKey
	val any
}

// Releaser is implemented by state values that return themselves to a pool
// when their cycle ends.
type Releaser interface {
	Release()
}

// NewCycleState returns an empty cycle state drawing randomness from rng.
// The scheduler makes its own; plugins' tests and tools use this.
func NewCycleState(rng *rand.Rand) *CycleState {
	return &CycleState{rng: rng}
}

// Reset ends the cycle: values implementing Releaser are released and the
// state is emptied for reuse.
func (c *CycleState) Reset() { c.reset() }

// Write stores v under k, replacing any earlier value.
func (c *CycleState) Write(k StateKey, v any) {
	for i := range c.entries {
		if c.entries[i].key == k {
			c.entries[i].val = v
			return
		}
	}
	c.entries = append(c.entries, stateEntry{k, v})
}

// Read returns the value stored under k.
func (c *CycleState) Read(k StateKey) (any, bool) {
	for i := range c.entries {
		if c.entries[i].key == k {
			return c.entries[i].val, true
		}
	}
	return nil, false
}

// ReadState returns the value under k if it has type T.
func ReadState[T any](c *CycleState, k StateKey) (T, bool) {
	v, ok := c.Read(k)
	if !ok {
		var zero T
		return zero, false
	}
	t, ok := v.(T)
	return t, ok
}

// Rand is the cycle's random source (pickers break ties with it). Tests seed
// it through WithRandSeed.
func (c *CycleState) Rand() *rand.Rand { return c.rng }

// ScratchInts returns a zeroed buffer of n ints owned by the cycle. It is
// valid until the next Scratch call of the same type; a plugin uses it within
// one call and must not keep it.
func (c *CycleState) ScratchInts(n int) []int { return scratch(&c.ints, n) }

// ScratchIndices is ScratchInts holding 0, 1, ..., n-1: the order of n
// endpoints, for a picker to sort or shuffle.
func (c *CycleState) ScratchIndices(n int) []int {
	order := scratch(&c.ints, n)
	for i := range order {
		order[i] = i
	}
	return order
}

// ScratchUint64s is ScratchInts for uint64.
func (c *CycleState) ScratchUint64s(n int) []uint64 { return scratch(&c.u64s, n) }

// ScratchFloat64s is ScratchInts for float64.
func (c *CycleState) ScratchFloat64s(n int) []float64 { return scratch(&c.f64s, n) }

func scratch[T any](buf *[]T, n int) []T {
	if cap(*buf) < n {
		*buf = make([]T, n)
	}
	*buf = (*buf)[:n]
	clear(*buf)
	return *buf
}

// ScratchBytes returns an empty byte buffer with capacity n owned by the
// cycle, under the same rules as ScratchInts.
func (c *CycleState) ScratchBytes(n int) []byte {
	if cap(c.bytes) < n {
		c.bytes = make([]byte, 0, n)
	}
	return c.bytes[:0]
}

func (c *CycleState) reset() {
	for i := range c.entries {
		if r, ok := c.entries[i].val.(Releaser); ok {
			r.Release()
		}
		c.entries[i] = stateEntry{}
	}
	c.entries = c.entries[:0]
}

// PrefixMatchKey is where the most recent prefix match of a cycle is
// stored (deciders read it); each prefix plugin also stores its own match
// under its instance name.
const PrefixMatchKey StateKey = "hermod.prefix-match"

// PrefixMatch is what a prefix-cache plugin knows about one request: the
// number of leading prompt blocks each endpoint holds. no-hit-lru-scorer
// and the prefix-based deciders read it. Matches are keyed by the
// endpoint's NameHash, so scoring a thousand endpoints needs no string
// hashing or comparison (64-bit collisions between endpoint names are
// ignored).
type PrefixMatch struct {
	// BlockSizeTokens is the block size the match was computed with.
	BlockSizeTokens int
	// TotalBlocks is the number of full blocks of the prompt considered.
	TotalBlocks int

	blocks map[uint64]int32 // NameHash -> consecutive matched blocks from block 0
	names  []string         // matched endpoints, in the order they were set
}

// Set records that endpoint (whose NameHash is hash) holds the first
// blocks blocks.
func (m *PrefixMatch) Set(endpoint string, hash uint64, blocks int) {
	if m.blocks == nil {
		m.blocks = make(map[uint64]int32)
	}
	if _, ok := m.blocks[hash]; !ok {
		m.names = append(m.names, endpoint)
	}
	m.blocks[hash] = int32(blocks)
}

// Clear empties the match for reuse.
func (m *PrefixMatch) Clear() {
	clear(m.blocks)
	clear(m.names)
	m.names = m.names[:0]
	m.BlockSizeTokens, m.TotalBlocks = 0, 0
}

// Len returns how many endpoints hold at least one block.
func (m *PrefixMatch) Len() int {
	if m == nil {
		return 0
	}
	return len(m.names)
}

// Matched returns the matched endpoints by name (for inspection; scoring
// uses BlocksOf).
func (m *PrefixMatch) Matched() map[string]int {
	out := make(map[string]int, m.Len())
	if m != nil {
		for _, name := range m.names {
			out[name] = int(m.blocks[NameHash(name)])
		}
	}
	return out
}

// BlocksOf returns how many leading blocks endpoint e holds.
func (m *PrefixMatch) BlocksOf(e *Endpoint) int {
	if m == nil || len(m.names) == 0 {
		return 0
	}
	return int(m.blocks[e.NameHash()])
}

// MatchedBlocks returns how many leading blocks the named endpoint holds.
func (m *PrefixMatch) MatchedBlocks(endpoint string) int {
	if m == nil || len(m.names) == 0 {
		return 0
	}
	return int(m.blocks[NameHash(endpoint)])
}

// CachedTokens returns the prompt tokens the named endpoint holds.
func (m *PrefixMatch) CachedTokens(endpoint string) int {
	if m == nil {
		return 0
	}
	return m.MatchedBlocks(endpoint) * m.BlockSizeTokens
}

// Hit reports whether any endpoint holds at least one block.
func (m *PrefixMatch) Hit() bool { return m.Len() > 0 }

// InFlightLoad is an endpoint's in-flight load: the requests routed to it
// and not finished, and their tokens (upstream's InFlightLoad).
type InFlightLoad struct {
	Requests int
	Tokens   int64
}

// InFlightLoader is a producer of endpoints' in-flight load
// (inflight-load-producer); active-request-scorer, token-load-scorer,
// utilization-filter and concurrency-detector read it.
type InFlightLoader interface {
	Plugin
	InFlightLoad(e *Endpoint) InFlightLoad
}

// PrefixMatcher is implemented by prefix-cache plugins. MatchPrefix
// computes the request's match at most once per cycle (later calls read it
// from cs), so consumers may call it whether or not the prefix scorer runs
// in their profile.
type PrefixMatcher interface {
	Plugin
	// MatchPrefix returns the match of req; candidates are the endpoints
	// the caller considers (a matcher may take tuning hints from them).
	MatchPrefix(ctx context.Context, cs *CycleState, req *Request, candidates []*Endpoint) *PrefixMatch
}

// PrefixMatcherFor is the prefix match a consumer reads: the plugin ref
// names, which must produce one (its prefixMatchInfoProducerName), or,
// with ref empty, the first plugin declared before it that does (nil when
// none is).
func PrefixMatcherFor(h Handle, ref string) (PrefixMatcher, error) {
	if ref == "" {
		for _, p := range h.Earlier() {
			if m, ok := p.(PrefixMatcher); ok {
				return m, nil
			}
		}
		return nil, nil
	}
	p, err := h.Plugin(ref)
	if err != nil {
		return nil, ParamErrorf("prefixMatchInfoProducerName", "%v", err)
	}
	m, ok := p.(PrefixMatcher)
	if !ok {
		return nil, ParamErrorf("prefixMatchInfoProducerName", "plugin %q (type %s) produces no prefix match", ref, p.TypedName().Type)
	}
	return m, nil
}

// PeerEndpointKey is where a profile handler keeps the endpoint an earlier
// stage picked (the decode pod) while it runs a later one (prefill), so
// that the later stage's plugins can place near it (topology affinity).
const PeerEndpointKey StateKey = "hermod.peer-endpoint"

// PeerEndpoint is the endpoint an earlier stage of the cycle picked (nil:
// none, or the stage picked no endpoint).
func PeerEndpoint(cs *CycleState) *Endpoint {
	if cs == nil {
		return nil
	}
	v, ok := cs.Read(PeerEndpointKey)
	if !ok {
		return nil
	}
	e, _ := v.(*Endpoint)
	return e
}

// PredictionsKey is where a latency predictor keeps its forecasts for the
// cycle's endpoints; decisions carry them (Result.Predictions).
const PredictionsKey StateKey = "hermod.latency-predictions"

// Prediction is a latency predictor's forecast for one request on one
// endpoint.
type Prediction struct {
	// TTFT is the predicted time to the first token, TPOT the predicted
	// mean time per output token after it.
	TTFT, TPOT time.Duration
	// TTFTHeadroom and TPOTHeadroom are the request's SLO minus the
	// prediction (negative: the SLO would be missed); zero when the
	// request sets no such SLO.
	TTFTHeadroom, TPOTHeadroom time.Duration
	// MeetsSLO is whether every SLO the request sets is predicted to be
	// met (true when it sets none).
	MeetsSLO bool
	// TTFTSLO and TPOTSLO are the request's SLOs (0: none).
	TTFTSLO, TPOTSLO time.Duration
	// TPOTCounts is whether the TPOT matters: a streamed request on an
	// endpoint that decodes.
	TPOTCounts bool
	// InFlight is the requests in flight to the endpoint when predicted.
	InFlight int
}

// Headrooms are the SLOs minus the predictions as the llm-d router's
// latency plugins read them: an SLO the request does not set counts as 0
// (so every endpoint misses it by its predicted latency), and a TPOT that
// does not count is neutral (0).
func (p Prediction) Headrooms() (ttft, tpot time.Duration) {
	ttft = p.TTFTSLO - p.TTFT
	if p.TPOTCounts {
		tpot = p.TPOTSLO - p.TPOT
	}
	return ttft, tpot
}

// LatencyPredictor is a producer of latency predictions
// (predicted-latency-producer); latency-scorer, slo-headroom-tier-filter
// and latency-slo-admitter read them.
type LatencyPredictor interface {
	Plugin
	// PredictLatency returns the predictions for req on eps, computed at
	// most once per endpoint per cycle.
	PredictLatency(ctx context.Context, cs *CycleState, req *Request, eps []*Endpoint) *Predictions
}

// Predictions are a cycle's forecasts, by endpoint name.
type Predictions struct {
	byName map[string]Prediction
}

// Set records the forecast for an endpoint.
func (p *Predictions) Set(endpoint string, pr Prediction) {
	if p.byName == nil {
		p.byName = make(map[string]Prediction)
	}
	p.byName[endpoint] = pr
}

// Get returns the forecast for an endpoint.
func (p *Predictions) Get(endpoint string) (Prediction, bool) {
	if p == nil {
		return Prediction{}, false
	}
	pr, ok := p.byName[endpoint]
	return pr, ok
}

// Reset empties the forecasts for reuse.
func (p *Predictions) Reset() { clear(p.byName) }
