// Package predictedlatency holds predicted-latency-scorer: it predicts each
// candidate's time to first token (TTFT) and time per output token (TPOT)
// for the request at hand, and routes to the endpoint that meets the
// request's latency SLO (x-slo-ttft-ms, x-slo-tpot-ms) or, without one,
// to the endpoint where it adds the least predicted latency (its own and
// the delay it causes the requests already there).
//
// The predictor runs in process, in well under a microsecond per
// candidate. It is a projection of the decision and completion streams:
// every decision records the features its prediction was made from (the
// request's uncached prompt and expected output; the target's prefill
// backlog, decoding batch and context from the requests in flight to it,
// which every picker replica counts alike; its waiting queue and KV-cache
// use from metrics), every completion the latencies observed, and each
// finished request becomes a training sample. The model is a ridge
// regression on a physical prior (the step costs of continuous batching)
// with a speed factor per endpoint, so a pool of unlike pods (different
// GPUs, or one throttled) is predicted right. Replicas fed the same
// streams, in any order, hold the same samples and so the same model; a
// restarted replica rebuilds it by replaying them.
package predictedlatency

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hermod/hermod/libs/plugins/flight"
	"github.com/hermod/hermod/libs/scheduling"
)

// Type is the registered plugin type.
const Type = "predicted-latency-scorer"

// ProducerType is the same predictor declared as the llm-d router's
// predicted-latency-producer (v0.10 split the scorer into it and
// latency-scorer, slo-headroom-tier-filter and latency-slo-admitter,
// which read its predictions): it learns from every decision and
// completion whether or not a profile names it.
const ProducerType = "predicted-latency-producer"

// Request headers.
const (
	// HeaderSLOTTFT and HeaderSLOTPOT carry the request's latency SLOs in
	// milliseconds (GIE's names); llm-d's current names are accepted too.
	HeaderSLOTTFT     = scheduling.HeaderSLOTTFTLegacy
	HeaderSLOTPOT     = scheduling.HeaderSLOTPOTLegacy
	HeaderLLMDSLOTTFT = scheduling.HeaderSLOTTFT
	HeaderLLMDSLOTPOT = scheduling.HeaderSLOTPOT
	// HeaderPriority is the request's priority (the gateway resolves
	// x-gateway-inference-objective into it); below 0 is sheddable.
	HeaderPriority = scheduling.PriorityHeader
)

func init() {
	scheduling.Register(scheduling.Registration{Type: Type, New: New})
	scheduling.Register(scheduling.Registration{Type: ProducerType, New: func(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
		return asPlugin(newPlugin(ProducerType, name, raw, h))
	}})
}

// Plugin is predicted-latency-scorer. It is a CyclePreparer (the
// request's own features, outside the scheduler's lock), a Filter (it
// sheds a sheddable request no endpoint can serve within its SLO), a
// Scorer, a PreRequest hook (the decision records its features and
// predictions), a Projection (the requests in flight per endpoint), a
// ResponseComplete hook (every finished request trains the model) and a
// StateRetainer.
type Plugin struct {
	scheduling.Named
	params Params
	prefix scheduling.PrefixMatcher // nil: read the cycle's prefix match, if any
	key    scheduling.StateKey
	state  *state
	pool   sync.Pool
}

// state is what a reloaded configuration's plugin takes over.
type state struct {
	flight   *flight.Tracker[uint64, inflight, outcome]
	model    *model
	progress *progress
	lastOwn  atomic.Uint64 // the decision this replica took last
	metrics  *metricSet
}

// inflight is a request in flight, as its decision recorded it. It is
// kept small: every prediction scans the requests in flight to each
// candidate (the features, read only when the request finishes, are
// kept apart).
type inflight struct {
	x          *features
	prompt     float64 // prompt tokens
	uncached   float64 // of which not cached on the target
	output     float64 // expected output tokens
	ttft, tpot float64 // predicted, seconds
	sloTTFT    float64 // seconds; 0: none
	sloTPOT    float64
	endpoint   string
	own        bool // decided by this replica (its metrics are observed here)
}

// outcome is how a request ended.
type outcome struct {
	ok       bool
	streamed bool
	at       time.Time
	ttft     float64
	tpot     float64
	e2e      float64
	output   float64
	prompt   float64 // prompt tokens the engine counted (0: unknown)
}

// New builds a predicted-latency-scorer.
func New(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
	return asPlugin(newPlugin(Type, name, raw, h))
}

// asPlugin keeps a failed build's nil *Plugin out of the interface.
func asPlugin(p *Plugin, err error) (scheduling.Plugin, error) {
	if err != nil {
		return nil, err
	}
	return p, nil
}

func newPlugin(typ, name string, raw json.RawMessage, h scheduling.Handle) (*Plugin, error) {
	p, err := decodeParams(raw, h)
	if err != nil {
		return nil, err
	}
	if name == "" {
		name = typ
	}
	pl := &Plugin{Named: scheduling.Named{Type: typ, Name: name}, params: p, key: scheduling.StateKey(typ + "/" + name)}
	if p.PrefixPluginName != "" {
		dep, err := h.Plugin(p.PrefixPluginName)
		if err != nil {
			return nil, scheduling.ParamErrorf("prefixPluginName", "%v", err)
		}
		m, ok := dep.(scheduling.PrefixMatcher)
		if !ok {
			return nil, scheduling.ParamErrorf("prefixPluginName", "%q (type %s) is not a prefix-cache plugin", p.PrefixPluginName, dep.TypedName().Type)
		}
		pl.prefix = m
	} else {
		for _, e := range h.Earlier() {
			if m, ok := e.(scheduling.PrefixMatcher); ok {
				pl.prefix = m
				break
			}
		}
	}
	pl.state = newState(p, h.Now, newMetrics(h))
	pl.pool.New = func() any { return &cycle{} }
	return pl, nil
}

func newState(p Params, now func() time.Time, metrics *metricSet) *state {
	st := &state{
		flight:   flight.NewTracker[uint64, inflight, outcome](p.ContextTTL.Std(), now),
		model:    newModel(p.TrainingWindow.Std(), p.SamplesPerEndpoint, now, metrics),
		progress: newProgress(),
		metrics:  metrics,
	}
	st.flight.SetPair(st.learn)
	return st
}

// learn turns a finished request into a training sample (under the
// tracker's lock: the model only records it).
func (st *state) learn(id uint64, _ time.Time, s *inflight, o *outcome) {
	if s.own {
		st.metrics.observe(s, o)
	}
	if o.output > 0 {
		prompt := o.prompt
		if prompt <= 0 {
			prompt = s.prompt
		}
		st.progress.finished(s.endpoint, prompt, o.output)
	}
	if !o.ok || s.endpoint == "" {
		return
	}
	smp := sample{stamp: scheduling.StampOf(id, o.at), x: *s.x, output: o.output}
	if o.streamed {
		smp.ttft, smp.tpot = o.ttft, o.tpot
	} else {
		smp.e2e = o.e2e
	}
	if smp.ttft > 0 || smp.tpot > 0 || smp.e2e > 0 {
		st.model.add(s.endpoint, smp)
	}
}

// Parameters implements scheduling.ParameterReporter.
func (p *Plugin) Parameters() any { return p.params }

// cycle is the plugin's per-request state.
type cycle struct {
	plugin   *Plugin
	prompt   float64 // prompt tokens (tokenized, or estimated)
	output   float64 // expected output tokens
	sloTTFT  float64 // seconds; 0: none
	sloTPOT  float64
	priority int
	streamed bool
	preds    map[string]*candidate // by endpoint name
	spare    []*candidate
	out      []*candidate
	values   []float64 // the decision's effect values
	work     []flightWork
	reported scheduling.Predictions
}

// candidate is one endpoint's prediction for the request.
type candidate struct {
	x           features
	uncached    float64
	prefixRatio float64 // fraction of the prompt the endpoint holds
	inFlight    int
	ttft, tpot  float64
	e2e         float64
	// overlap is the decode steps the requests in flight share with this
	// one (the sum of min(their remaining, its output)), decoding how
	// many of them decode now: the delay it adds to them
	overlap, decoding float64
	cost              float64 // e2e plus the delay added to the others
	meets             bool
	prefill           bool // a prefill endpoint: its TPOT does not count
}

// Release implements scheduling.Releaser.
func (c *cycle) Release() {
	for _, cd := range c.preds {
		c.spare = append(c.spare, cd)
	}
	clear(c.preds)
	clear(c.out)
	c.reported.Reset()
	p := c.plugin
	c.plugin = nil
	p.pool.Put(c)
}

// PrepareCycle implements scheduling.CyclePreparer: the request's tokens,
// expected output, SLOs and priority, before the scheduler's lock.
func (p *Plugin) PrepareCycle(_ context.Context, cs *scheduling.CycleState, req *scheduling.Request, _ []*scheduling.Endpoint) {
	p.request(cs, req)
	// samples that arrived since the last fit are fitted now, in the
	// background (completions refit too, at most every 250 ms: the last
	// ones before a quiet spell wait for the next request)
	p.state.model.maybeRefit()
}

// request returns the cycle's request-level state, computing it once.
func (p *Plugin) request(cs *scheduling.CycleState, req *scheduling.Request) *cycle {
	if c, ok := scheduling.ReadState[*cycle](cs, p.key); ok {
		return c
	}
	c := p.pool.Get().(*cycle)
	c.plugin = p
	if c.preds == nil {
		c.preds = map[string]*candidate{}
	}
	c.prompt = req.EstimatedTokens(charsToTokens)
	c.output = float64(req.Body.MaxTokens)
	if c.output <= 0 {
		c.output = p.state.model.current.Load().meanOutput
	}
	c.streamed = req.Body.Stream
	c.sloTTFT = scheduling.SLOMillis(req.Header, HeaderSLOTTFT, HeaderLLMDSLOTTFT).Seconds()
	c.sloTPOT = 0
	if p.params.streaming() && c.streamed {
		c.sloTPOT = scheduling.SLOMillis(req.Header, HeaderSLOTPOT, HeaderLLMDSLOTPOT).Seconds() * p.params.SLOBufferFactor
	}
	c.priority = req.Priority()
	cs.Write(p.key, c)
	return c
}

// charsToTokens estimates prompt tokens from characters when the request
// was not tokenized (about 4 characters a token).
const charsToTokens = 0.25

// predict returns the predictions for eps (computed once per endpoint per
// cycle) and records them for the decision event.
func (p *Plugin) predict(ctx context.Context, cs *scheduling.CycleState, req *scheduling.Request, eps []*scheduling.Endpoint) (*cycle, []*candidate) {
	c := p.request(cs, req)
	var match *scheduling.PrefixMatch
	if p.prefix != nil {
		match = p.prefix.MatchPrefix(ctx, cs, req, eps)
	} else if m, ok := scheduling.ReadState[*scheduling.PrefixMatch](cs, scheduling.PrefixMatchKey); ok {
		match = m
	}
	preds, _ := scheduling.ReadState[*scheduling.Predictions](cs, scheduling.PredictionsKey)
	if preds == nil {
		preds = &c.reported
		cs.Write(scheduling.PredictionsKey, preds)
	}
	f := p.state.model.current.Load()
	if cap(c.out) < len(eps) {
		c.out = make([]*candidate, len(eps))
	}
	out := c.out[:len(eps)]
	for i, e := range eps {
		if cd, ok := c.preds[e.Name]; ok {
			out[i] = cd
			continue
		}
		cd := c.newCandidate()
		p.features(c, cd, e, match)
		cd.ttft, cd.tpot = f.predict(e.Name, &cd.x)
		cd.prefill = p.params.EndpointRoleLabel != "" && e.Labels[p.params.EndpointRoleLabel] == "prefill"
		cd.e2e = cd.ttft
		if !cd.prefill {
			cd.e2e += max(c.output-1, 0) * cd.tpot
		}
		cd.cost = cd.e2e + f.delayAdded(e.Name, c.prompt, cd.uncached, c.output, cd.overlap, cd.decoding)
		cd.meets = (c.sloTTFT == 0 || cd.ttft <= c.sloTTFT) && (c.sloTPOT == 0 || cd.prefill || cd.tpot <= c.sloTPOT)
		c.preds[e.Name] = cd
		out[i] = cd
		pr := scheduling.Prediction{TTFT: seconds(cd.ttft), TPOT: seconds(cd.tpot), MeetsSLO: cd.meets, InFlight: cd.inFlight,
			TPOTCounts: c.streamed && p.params.streaming() && !cd.prefill}
		if c.sloTTFT > 0 {
			pr.TTFTSLO = seconds(c.sloTTFT)
			pr.TTFTHeadroom = seconds(c.sloTTFT - cd.ttft)
		}
		if c.sloTPOT > 0 && !cd.prefill {
			pr.TPOTSLO = seconds(c.sloTPOT)
			pr.TPOTHeadroom = seconds(c.sloTPOT - cd.tpot)
		}
		preds.Set(e.Name, pr)
	}
	return c, out
}

func (c *cycle) newCandidate() *candidate {
	if n := len(c.spare); n > 0 {
		cd := c.spare[n-1]
		c.spare = c.spare[:n-1]
		*cd = candidate{}
		return cd
	}
	return &candidate{}
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// features computes the request's features on endpoint e from the
// requests in flight to it (their progress estimated from their own
// predictions) and its metrics.
func (p *Plugin) features(c *cycle, cd *candidate, e *scheduling.Endpoint, match *scheduling.PrefixMatch) {
	cached := 0.0
	if match != nil && match.TotalBlocks > 0 {
		cached = float64(match.CachedTokens(e.Name))
		cd.prefixRatio = float64(match.BlocksOf(e)) / float64(match.TotalBlocks)
	}
	cd.uncached = max(c.prompt-cached, 0)
	o := max(c.output, 1)
	// each request in flight: how far it has got, as its own prediction
	// has it, then corrected to what the engine's counters show
	work := c.work[:0]
	var predPrompt, predOutput, prompts float64
	p.state.flight.Each(e.NameHash(), func(elapsed time.Duration, s *inflight) {
		el := elapsed.Seconds()
		w := flightWork{prompt: s.prompt, uncached: s.uncached, output: s.output, pending: 1}
		if el < s.ttft {
			w.pending = 1 - el/s.ttft
		} else {
			w.pending = 0
			w.generated = min(1+(el-s.ttft)/s.tpot, s.output)
		}
		predPrompt += s.prompt * (1 - w.pending)
		predOutput += w.generated
		prompts += s.prompt
		work = append(work, w)
	})
	c.work = work
	n := len(work)
	if promptIn, outputIn, ok := p.state.progress.sync(e, n); ok && n > 0 {
		correct(work, promptIn, outputIn, predPrompt, predOutput, prompts)
	}
	var pending, decoding, context, batch, batchContext float64
	cd.overlap = 0
	for i := range work {
		w := &work[i]
		remaining := max(w.output-w.generated, 1)
		ctx := w.prompt + w.generated
		pending += w.uncached * w.pending
		decoding += 1 - w.pending
		context += (1 - w.pending) * ctx
		// the batch it will decode in: those in flight now (as they
		// finish, new arrivals take their places: under steady traffic
		// the batch a request starts with is the batch it keeps)
		batch++
		batchContext += ctx + min(remaining, o)/2
		cd.overlap += min(remaining, o)
	}
	cd.decoding = decoding
	cd.inFlight = n
	var waiting, kv float64
	if m := e.Metrics; m != nil {
		waiting, kv = float64(m.WaitingRequests), m.KVCacheUsage
	}
	ahead := (cd.uncached + pending) / 1e3
	x := &cd.x
	x.ttft = [nTTFT]float64{
		tOne: 1, tUncached: cd.uncached / 1e3, tPrefill: pending / 1e3, tDecoding: decoding / 100, tContext: context / 1e5,
		tPrefillXD: ahead * decoding / 100, tPrefillXK: ahead * context / 1e5, tWaiting: waiting / 10,
	}
	x.tpot = [nTPOT]float64{
		dOne: 1, dBatch: (batch + 1) / 100, dContext: (batchContext + c.prompt + o/2) / 1e5, dPrefill: (pending + cd.uncached) / 1e3, dKV: kv,
	}
}

// flightWork is a request in flight (its prompt, uncached prompt and
// expected output tokens) and how far it has got: the share of its prompt
// still to prefill, and the output tokens generated.
type flightWork struct {
	prompt, uncached, output float64
	pending                  float64
	generated                float64
}

// correct scales the predicted progress of an endpoint's requests in
// flight to the tokens its engine counted for them: prompt tokens
// prefilled (of prompts in all) and output tokens generated. Where the
// prediction says nothing has happened yet and the engine says it has,
// the progress is shared out evenly.
func correct(work []flightWork, promptIn, outputIn, predPrompt, predOutput, prompts float64) {
	if prompts > 0 {
		measured := min(max(prompts-promptIn, 0)/prompts, 1) // share still to prefill
		predicted := 1 - predPrompt/prompts
		for i := range work {
			w := &work[i]
			switch {
			case predicted > 0:
				w.pending = min(w.pending*measured/predicted, 1)
			default:
				w.pending = measured
			}
		}
	}
	for i := range work {
		w := &work[i]
		limit := max(w.output-1, 0) // in flight: not done yet
		switch {
		case predOutput > 0:
			w.generated = min(w.generated*outputIn/predOutput, limit)
		default:
			w.generated = min(outputIn/float64(len(work)), limit)
		}
	}
}

// String describes the plugin's state for logs and debugging.
func (p *Plugin) String() string {
	f := p.state.model.current.Load()
	return fmt.Sprintf("%s: %d in flight, model of %d samples", p.TypedName(), p.state.flight.Len(), f.samples)
}

// ModelState is the predictor's model as /debug/projection shows it.
type ModelState struct {
	// Samples is how many finished requests the fit was made from.
	Samples int `json:"samples"`
	// TTFT and TPOT are the shared coefficients, by feature.
	TTFT map[string]float64 `json:"ttft"`
	TPOT map[string]float64 `json:"tpot"`
	// Speeds are each endpoint's factors of the TTFT and TPOT predictions
	// (2: twice as slow as the pool's shape).
	Speeds map[string][2]float64 `json:"speeds"`
	// MeanOutput is the output expected of a request without max_tokens.
	MeanOutput float64 `json:"mean_output"`
	// InFlight is the requests in flight, by endpoint.
	InFlight map[string]int `json:"in_flight"`
}

var (
	ttftNames = [nTTFT]string{"one", "uncached_per_1k", "prefill_ahead_per_1k", "decoding_per_100", "context_per_100k", "ahead_x_decoding", "ahead_x_context", "waiting_per_10"}
	tpotNames = [nTPOT]string{"one", "batch_per_100", "context_per_100k", "prefill_per_1k", "kv_usage"}
)

// Model returns the model in force and the requests in flight to the
// named endpoints.
func (p *Plugin) Model(endpoints []string) ModelState {
	f := p.state.model.current.Load()
	st := ModelState{Samples: f.samples, TTFT: map[string]float64{}, TPOT: map[string]float64{}, Speeds: map[string][2]float64{}, MeanOutput: f.meanOutput, InFlight: map[string]int{}}
	for i, n := range ttftNames {
		st.TTFT[n] = f.theta[i]
	}
	for i, n := range tpotNames {
		st.TPOT[n] = f.theta[nTTFT+i]
	}
	for k, v := range f.scales {
		st.Speeds[k] = v
	}
	for _, e := range endpoints {
		st.InFlight[e] = p.state.flight.InFlight(e)
	}
	return st
}

// PredictLatency implements scheduling.LatencyPredictor: what
// latency-scorer, slo-headroom-tier-filter and latency-slo-admitter read.
func (p *Plugin) PredictLatency(ctx context.Context, cs *scheduling.CycleState, req *scheduling.Request, eps []*scheduling.Endpoint) *scheduling.Predictions {
	p.predict(ctx, cs, req, eps)
	preds, _ := scheduling.ReadState[*scheduling.Predictions](cs, scheduling.PredictionsKey)
	return preds
}
