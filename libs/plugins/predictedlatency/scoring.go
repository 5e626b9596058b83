package predictedlatency

import (
	"context"
	"math"
	"time"

	"github.com/hermod/hermod/libs/scheduling"
)

// Score implements scheduling.Scorer.
//
// Without an SLO the request goes where it adds the least predicted
// latency: its own predicted end-to-end time (TTFT plus its expected
// output at the predicted TPOT) plus the delay it adds to the requests in
// flight there (each decoding step it shares with them is longer by its
// cost). Counting only its own latency would be selfish: every request
// would crowd onto the fastest pod until the fast pod is as slow as the
// others, long requests included. score = the lowest such cost among the
// candidates over the endpoint's own, so the best scores 1.
//
// With an SLO, the endpoints predicted to meet it (the positive tier) are
// scored by headroom (least or most first, as headroomSelectionStrategy
// says) and the others 0; when none meets it, every endpoint is scored by
// its deficit, the least deficit first (idle endpoints before busy
// ones). Before tiering, and again within the tier, the affinity gates
// keep only the endpoints that hold the prompt's prefix when some do and
// they are not too much slower.
func (p *Plugin) Score(ctx context.Context, cs *scheduling.CycleState, req *scheduling.Request, eps []*scheduling.Endpoint, scores []float64) {
	c, cands := p.predict(ctx, cs, req, eps)
	if len(cands) == 0 {
		return
	}
	rnd := func() float64 {
		if r := cs.Rand(); r != nil {
			return r.Float64()
		}
		return 1
	}
	n := len(cands)
	scratch := cs.ScratchInts(3 * n)
	in := scratch[:0:n]
	for i := range cands {
		in = append(in, i)
	}
	if p.params.HeadroomSelectionStrategy == StrategyCompositeOnly {
		p.composite(cands, eps, in, scores, false)
		return
	}
	in = p.gate(cands, in, p.params.AffinityGateTauGlobal, rnd)
	if c.sloTTFT == 0 && c.sloTPOT == 0 {
		best := math.Inf(1)
		for _, i := range in {
			best = min(best, cands[i].cost)
		}
		for _, i := range in {
			scores[i] = best / cands[i].cost
		}
		return
	}
	pos, neg := split(cands, in, scratch[n:])
	if len(pos) > 0 && (len(neg) == 0 || rnd() >= p.params.EpsilonExploreNeg) {
		pos = p.gate(cands, pos, p.params.AffinityGateTau, rnd)
		switch p.params.HeadroomSelectionStrategy {
		case StrategyCompositeLeast, StrategyCompositeMost:
			p.composite(cands, eps, pos, scores, p.params.HeadroomSelectionStrategy == StrategyCompositeLeast)
		default:
			p.headroom(c, cands, pos, scores, p.params.HeadroomSelectionStrategy == StrategyLeast)
		}
		return
	}
	// no endpoint meets the SLO (or this request explores those that do
	// not): idle ones first, then the least deficit
	idle := neg[:0] // filtered in place
	for _, i := range neg {
		if cands[i].inFlight == 0 {
			idle = append(idle, i)
		}
	}
	if len(idle) > 0 {
		neg = idle
	}
	neg = p.gate(cands, neg, p.params.AffinityGateTau, rnd)
	p.deficit(c, cands, neg, scores)
}

// split divides the endpoints in into those predicted to meet the SLO and
// the others, in buf (of length at least 2 x len(in), not shared with in).
func split(cands []*candidate, in, buf []int) (pos, neg []int) {
	n := len(in)
	pos = buf[:0:n]
	neg = buf[n : n : 2*n]
	for _, i := range in {
		if cands[i].meets {
			pos = append(pos, i)
		} else {
			neg = append(neg, i)
		}
	}
	return pos, neg
}

// gate keeps, among in (filtered in place), the endpoints holding at least
// tau of the prompt, when some do, unless the request explores (epsilonExploreSticky) or the
// best of them is predicted more than affinityMaxTTFTPenaltyMs slower to
// its first token than the best of all.
func (p *Plugin) gate(cands []*candidate, in []int, tau float64, rnd func() float64) []int {
	if tau <= 0 || tau > 1 || len(in) < 2 {
		return in
	}
	bestAll, bestSticky := math.Inf(1), math.Inf(1)
	sticky := 0
	for _, i := range in {
		bestAll = min(bestAll, cands[i].ttft)
		if cands[i].prefixRatio >= tau {
			sticky++
			bestSticky = min(bestSticky, cands[i].ttft)
		}
	}
	if sticky == 0 || sticky == len(in) || (bestSticky-bestAll)*1e3 > p.params.AffinityMaxTTFTPenaltyMs || rnd() < p.params.EpsilonExploreSticky {
		return in
	}
	out := in[:0]
	for _, i := range in {
		if cands[i].prefixRatio >= tau {
			out = append(out, i)
		}
	}
	return out
}

// headroom scores the endpoints that meet the SLO by their blended,
// normalised headroom: least (the tightest fit first) or most.
func (p *Plugin) headroom(c *cycle, cands []*candidate, in []int, scores []float64, least bool) {
	ttft := func(cd *candidate) float64 { return c.sloTTFT - cd.ttft }
	tpot := func(cd *candidate) float64 {
		if cd.prefill {
			return 0
		}
		return c.sloTPOT - cd.tpot
	}
	p.blend(c, cands, in, scores, ttft, tpot, p.params.HeadroomTTFTWeight, p.params.HeadroomTPOTWeight, !least)
}

// deficit scores endpoints that miss the SLO: the least deficit first.
func (p *Plugin) deficit(c *cycle, cands []*candidate, in []int, scores []float64) {
	ttft := func(cd *candidate) float64 { return max(cd.ttft-c.sloTTFT, 0) }
	tpot := func(cd *candidate) float64 {
		if cd.prefill || c.sloTPOT == 0 {
			return 0
		}
		return max(cd.tpot-c.sloTPOT, 0)
	}
	p.blend(c, cands, in, scores, ttft, tpot, p.params.NegHeadroomTTFTWeight, p.params.NegHeadroomTPOTWeight, false)
}

// blend normalises two per-endpoint quantities over in (min-max; 0.5 when
// all are alike), blends them with the weights (a dimension the request
// has no SLO for gives its weight to the other) and scores
// 0.01 + 0.99 x (the blend, or 1 - the blend when higherFirst is false),
// so every endpoint in keeps a positive score.
func (p *Plugin) blend(c *cycle, cands []*candidate, in []int, scores []float64, a, b func(*candidate) float64, wa, wb float64, higherFirst bool) {
	if c.sloTTFT == 0 {
		wa = 0
	}
	if c.sloTPOT == 0 {
		wb = 0
	}
	if wa+wb == 0 {
		wa = 1
	}
	wa, wb = wa/(wa+wb), wb/(wa+wb)
	aLo, aHi := math.Inf(1), math.Inf(-1)
	bLo, bHi := math.Inf(1), math.Inf(-1)
	for _, i := range in {
		va, vb := a(cands[i]), b(cands[i])
		aLo, aHi = min(aLo, va), max(aHi, va)
		bLo, bHi = min(bLo, vb), max(bHi, vb)
	}
	norm := func(v, lo, hi float64) float64 {
		if hi <= lo {
			return 0.5
		}
		return (v - lo) / (hi - lo)
	}
	for _, i := range in {
		v := wa*norm(a(cands[i]), aLo, aHi) + wb*norm(b(cands[i]), bLo, bHi)
		if !higherFirst {
			v = 1 - v
		}
		scores[i] = 0.01 + 0.99*v
	}
}

// composite scores by free KV cache, queue and prefix hit, weighted
// (upstream's composite strategies): inverted for composite-least.
func (p *Plugin) composite(cands []*candidate, eps []*scheduling.Endpoint, in []int, scores []float64, invert bool) {
	wk, wq, wp := p.params.CompositeKVWeight, p.params.CompositeQueueWeight, p.params.CompositePrefixWeight
	sum := wk + wq + wp
	if sum == 0 {
		wk, wq, wp, sum = 1, 1, 1, 3
	}
	qLo, qHi := math.Inf(1), math.Inf(-1)
	for _, i := range in {
		q := waiting(eps[i])
		qLo, qHi = min(qLo, q), max(qHi, q)
	}
	for _, i := range in {
		kv := 0.0
		if m := eps[i].Metrics; m != nil {
			kv = m.KVCacheUsage
		}
		rel := 1.0
		if qHi > qLo {
			rel = (qHi - waiting(eps[i])) / (qHi - qLo)
		}
		v := (wk*(1-kv) + wq*rel + wp*cands[i].prefixRatio) / sum
		if invert {
			v = 1 - v
		}
		scores[i] = 0.01 + 0.99*min(max(v, 0), 1)
	}
}

func waiting(e *scheduling.Endpoint) float64 {
	if e.Metrics == nil {
		return 0
	}
	return float64(e.Metrics.WaitingRequests)
}

// ShedsLoad implements scheduling.LoadShedder: the requests Filter leaves
// no endpoint are shed (429), not unmatched.
func (p *Plugin) ShedsLoad() {}

// Filter implements scheduling.Filter: a sheddable request (priority
// below 0) with an SLO that no endpoint is predicted to meet is shed (the
// profile is left with no endpoint: 429), unless an endpoint is idle or
// has a nearly empty KV cache (the prediction may be wrong about it).
// Every other request keeps every endpoint.
func (p *Plugin) Filter(ctx context.Context, cs *scheduling.CycleState, req *scheduling.Request, in, dst []*scheduling.Endpoint) []*scheduling.Endpoint {
	c, cands := p.predict(ctx, cs, req, in)
	if c.priority >= 0 || (c.sloTTFT == 0 && c.sloTPOT == 0) {
		return append(dst, in...)
	}
	for i, cd := range cands {
		if cd.meets || cd.inFlight == 0 || (in[i].Metrics != nil && in[i].Metrics.KVCacheUsage < coldKV) {
			return append(dst, in...)
		}
	}
	p.state.metrics.shed.Inc()
	return dst
}

// coldKV is the KV-cache use below which an endpoint counts as cold.
const coldKV = 0.02

// Effect values, in order (layout 1).
const (
	valLayout = iota
	valTTFT0
	valTPOT0       = valTTFT0 + nTTFT
	valPrompt      = valTPOT0 + nTPOT
	valUncached    = valPrompt + 1
	valOutput      = valPrompt + 2
	valPredTTFT    = valPrompt + 3
	valPredTPOT    = valPrompt + 4
	valSLOTTFT     = valPrompt + 5
	valSLOTPOT     = valPrompt + 6
	nValues        = valPrompt + 7
	layoutVersion1 = 1
)

// PreRequest implements scheduling.PreRequest: the decision records, for
// its primary target, the features the prediction was made from and the
// prediction (applied by ApplyEffect, here and in every replica).
func (p *Plugin) PreRequest(_ context.Context, cs *scheduling.CycleState, _ *scheduling.Request, res *scheduling.Result) {
	t, ok := res.Primary.Target()
	if !ok {
		return
	}
	c, ok := scheduling.ReadState[*cycle](cs, p.key)
	if !ok {
		return
	}
	cd, ok := c.preds[t.Endpoint.Name]
	if !ok {
		return
	}
	// the effect keeps the values until the result is released, when the
	// cycle's state is
	if cap(c.values) < nValues {
		c.values = make([]float64, nValues)
	}
	v := c.values[:nValues]
	clear(v)
	v[valLayout] = layoutVersion1
	copy(v[valTTFT0:], cd.x.ttft[:])
	copy(v[valTPOT0:], cd.x.tpot[:])
	v[valPrompt], v[valUncached], v[valOutput] = c.prompt, cd.uncached, c.output
	v[valPredTTFT], v[valPredTPOT] = cd.ttft, cd.tpot
	v[valSLOTTFT], v[valSLOTPOT] = c.sloTTFT, c.sloTPOT
	p.state.lastOwn.Store(res.DecisionID)
	name := [1]string{t.Endpoint.Name}
	res.Record(scheduling.Effect{Plugin: p.TypedName(), Endpoints: name[:], Values: v})
}

// ApplyEffect implements scheduling.Projection: the request is in flight
// on the effect's endpoint from the decision's time, with the features and
// predictions it recorded. An effect of another layout is skipped.
func (p *Plugin) ApplyEffect(decisionID uint64, at time.Time, e *scheduling.Effect) {
	v := e.Values
	if len(v) < nValues || v[valLayout] != layoutVersion1 || len(e.Endpoints) == 0 || !validValues(v) {
		return
	}
	s := inflight{
		prompt: v[valPrompt], uncached: v[valUncached], output: max(v[valOutput], 1),
		ttft: max(v[valPredTTFT], minPrediction), tpot: max(v[valPredTPOT], minPrediction),
		sloTTFT: v[valSLOTTFT], sloTPOT: v[valSLOTPOT],
		endpoint: e.Endpoints[0],
		own:      decisionID == p.state.lastOwn.Load(),
	}
	s.x = new(features)
	copy(s.x.ttft[:], v[valTTFT0:valTTFT0+nTTFT])
	copy(s.x.tpot[:], v[valTPOT0:valTPOT0+nTPOT])
	if at.IsZero() {
		p.state.flight.StartWith(decisionID, e.Endpoints[:1], time.Now(), s)
		return
	}
	p.state.flight.StartWith(decisionID, e.Endpoints[:1], at, s)
}

// validValues reports whether effect values can be trusted: every one
// finite and not negative (an event from a faulty or hostile replica must
// not poison every replica's model).
func validValues(v []float64) bool {
	for _, x := range v[:nValues] {
		if math.IsNaN(x) || math.IsInf(x, 0) || x < 0 || x > maxValue {
			return false
		}
	}
	return true
}

// maxDuration bounds a measured latency: beyond it, not a measurement.
const maxDuration = 24 * time.Hour

// maxValue bounds an effect value (tokens, seconds): beyond it, a value is
// not a measurement.
const maxValue = 1e9

// ResponseComplete implements scheduling.ResponseComplete: the request is
// no longer in flight, and a request that succeeded teaches the model
// what its latencies were.
func (p *Plugin) ResponseComplete(_ context.Context, resp *scheduling.Response) {
	u := resp.Usage
	o := outcome{
		ok: resp.StatusCode >= 200 && resp.StatusCode < 300 && u.CompletionTokens > 0 && u.PromptTokens >= 0 &&
			u.TTFT >= 0 && u.TPOT >= 0 && u.Duration >= 0 && u.CompletionTokens < maxValue && u.Duration < maxDuration,
		streamed: resp.Streamed,
		at:       resp.Time,
		ttft:     resp.Usage.TTFT.Seconds(),
		tpot:     resp.Usage.TPOT.Seconds(),
		e2e:      resp.Usage.Duration.Seconds(),
		output:   float64(resp.Usage.CompletionTokens),
		prompt:   float64(resp.Usage.PromptTokens),
	}
	if o.at.IsZero() {
		o.at = time.Now()
	}
	p.state.flight.DoneWith(resp.DecisionID, o)
	p.state.model.maybeRefit()
}

// StateRetention implements scheduling.StateRetainer: a rebuilding
// replica replays the training window, and the requests in flight at its
// start.
func (p *Plugin) StateRetention() time.Duration {
	return p.params.TrainingWindow.Std() + p.params.ContextTTL.Std()
}

// InheritState implements scheduling.StateInheritor: the requests in flight
// and the model carry over, under this configuration's timeout, window
// and sample count.
func (p *Plugin) InheritState(prev scheduling.Plugin) bool {
	q, ok := prev.(*Plugin)
	if !ok {
		return false
	}
	q.state.flight.SetTimeout(p.params.ContextTTL.Std())
	q.state.model.configure(p.params.TrainingWindow.Std(), p.params.SamplesPerEndpoint)
	p.state = q.state
	return true
}

// EndpointRemoved implements scheduling.EndpointRemover: the endpoint's
// samples leave the model.
func (p *Plugin) EndpointRemoved(name string) {
	p.state.model.drop(name)
	p.state.progress.forget(name)
}

// Refit fits the model to the samples held now (it otherwise refits as
// requests finish, at most every 250 ms).
func (p *Plugin) Refit() { p.state.model.refit() }

// Predict returns the TTFT and TPOT the current model predicts for the
// features of a decision's effect on endpoint (tests and tools).
func (p *Plugin) Predict(endpoint string, e *scheduling.Effect) (ttft, tpot time.Duration, ok bool) {
	v := e.Values
	if len(v) < nValues || v[valLayout] != layoutVersion1 || !validValues(v) {
		return 0, 0, false
	}
	var x features
	copy(x.ttft[:], v[valTTFT0:valTTFT0+nTTFT])
	copy(x.tpot[:], v[valTPOT0:valTPOT0+nTPOT])
	t, d := p.state.model.current.Load().predict(endpoint, &x)
	return seconds(t), seconds(d), true
}
