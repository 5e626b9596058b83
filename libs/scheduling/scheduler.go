package scheduling

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"runtime/debug"
	"sync"
	"time"

	"github.com/hermod/hermod/libs/openai"
	"github.com/hermod/hermod/libs/telemetry"
)

// Scheduler runs scheduling cycles for one pool with one configuration. It is
// safe for concurrent use. The profiles, scorers, picker and pre-request
// hooks of a cycle run in one critical section, so stateful plugins (in-flight
// counts, LRUs) see every earlier decision: request n+1 sees request n even
// in a burst. Prepare-data plugins run before it, concurrently.
type Scheduler struct {
	mu           sync.Mutex
	rng          *rand.Rand // guarded by mu
	decisionBase uint64     // random; decision ids are base + seq
	decisionSeq  uint64     // guarded by mu

	handler      ProfileHandler
	handlerTimer pluginTimer
	profiles     map[string]*profile
	profileOrder []string

	plugins          []Plugin
	prepare          []timed[PrepareData]
	preparers        []timed[CyclePreparer]
	preRequest       []timed[PreRequest]
	admitters        []timed[Admitter]
	screeners        []timed[Screener]
	detector         SaturationDetector // nil: no saturation admission
	apis             apiSet             // the APIs the config's parsers serve
	unread           apiSet             // those its fallback parser takes: routed without their prompt
	responseReceived []timed[ResponseReceived]
	responseComplete []timed[ResponseComplete]
	projections      map[string]Projection // by plugin name
	fresh            []TypedName           // projections that inherited no state

	now func() time.Time

	logger  *slog.Logger
	metrics *SchedulerMetrics
	desc    *Resolved
	pool    sync.Pool
}

type timed[T any] struct {
	p T
	t pluginTimer
}

type profile struct {
	filters []Filter
	scorers []weightedScorer
	picker  Picker

	filterTimers []pluginTimer
	pickerTimer  pluginTimer
	scorerInfo   []ScorerInfo
}

type weightedScorer struct {
	Scorer
	weight float64
	timer  pluginTimer
	name   slog.Attr
}

func (p *profile) prepare(m *SchedulerMetrics) {
	p.filterTimers = make([]pluginTimer, len(p.filters))
	for i, f := range p.filters {
		p.filterTimers[i] = m.timer(PointFilter, f)
	}
	p.scorerInfo = make([]ScorerInfo, len(p.scorers))
	for i := range p.scorers {
		tn := p.scorers[i].TypedName()
		p.scorers[i].timer = m.timer(PointScorer, p.scorers[i].Scorer)
		p.scorers[i].name = slog.String("scorer", tn.Name)
		p.scorerInfo[i] = ScorerInfo{Name: tn.Name, Type: tn.Type, Weight: p.scorers[i].weight}
	}
	p.pickerTimer = m.timer(PointPicker, p.picker)
}

// Describe returns the resolved configuration: plugins in instantiation
// order with their effective parameters, the profile handler, each
// profile's filters, weighted scorers and picker, and load warnings.
func (s *Scheduler) Describe() *Resolved { return s.desc }

// Plugins returns every active plugin instance in declaration order
// (followed by those the builder added).
func (s *Scheduler) Plugins() []Plugin { return s.plugins }

// Metrics returns the metrics the scheduler was built with (WithMetrics;
// nil: none, and their methods do nothing).
func (s *Scheduler) Metrics() *SchedulerMetrics { return s.metrics }

// Schedule picks the endpoints that serve req among candidates. On success
// the Result's Primary target serves the request. Errors are *Error values
// whose kind maps to 503 (no candidates, or a screener or a profile's
// filters left none), 429 (shed) or 400 (bad request). The caller may
// Release the result when done with it.
func (s *Scheduler) Schedule(ctx context.Context, req *Request, candidates []*Endpoint) (*Result, error) {
	var start time.Time
	if s.metrics != nil {
		start = time.Now()
	}
	if len(candidates) == 0 {
		err := &Error{Kind: KindNoCandidates, Msg: "no ready endpoints in the pool"}
		s.metrics.cycleDone(start, req, nil, err)
		return nil, err
	}
	if len(s.screeners) > 0 {
		screened, err := s.screen(ctx, req, candidates)
		if err != nil {
			s.metrics.cycleDone(start, req, nil, err)
			return nil, err
		}
		candidates = screened
	}
	if s.Unread(req.Body.API) { // passed through: routed by model and load
		req.Body = openai.Request{API: req.Body.API, Model: req.Body.Model, Stream: req.Body.Stream}
		req.TokenIDs = nil
	}
	for _, p := range s.prepare {
		t := p.t.start()
		if err := p.p.PrepareData(ctx, req); err != nil {
			s.logger.LogAttrs(ctx, slog.LevelWarn, "prepare-data plugin failed; continuing without its data",
				slog.String("plugin", p.p.TypedName().Name), slog.String("request_id", req.ID), slog.String("error", err.Error()))
		}
		p.t.done(t)
	}

	c := s.pool.Get().(*cycle)
	res := &Result{RequestID: req.ID}
	c.begin(ctx, req, candidates, res)
	if err := s.prepareCycle(ctx, c, req); err != nil {
		s.metrics.cycleDone(start, req, nil, err)
		c.release()
		return nil, err
	}
	err := s.decide(ctx, c, req, res)
	s.metrics.cycleDone(start, req, res, err)
	if err != nil {
		c.release()
		return nil, err
	}
	res.cycle.Store(c)
	return res, nil
}

// prepareCycle runs the cycle preparers, outside the critical section. A
// panicking plugin fails the request with a KindInternal error.
func (s *Scheduler) prepareCycle(ctx context.Context, c *cycle, req *Request) (err error) {
	if len(s.preparers) == 0 {
		return nil
	}
	defer func() {
		if p := recover(); p != nil {
			err = &Error{Kind: KindInternal, Msg: fmt.Sprintf("a scheduling plugin panicked: %v", p)}
			s.logger.LogAttrs(ctx, slog.LevelError, "scheduling plugin panicked while preparing", slog.String("request_id", req.ID),
				slog.Any("panic", p), slog.String("stack", string(debug.Stack())))
		}
	}()
	for _, p := range s.preparers {
		t := p.t.start()
		p.p.PrepareCycle(ctx, &c.state, req, c.candidates)
		p.t.done(t)
	}
	return nil
}

// decide runs the profile handler and the pre-request hooks in the
// scheduler's critical section. A panicking plugin fails the request with a
// KindInternal error instead of leaving the scheduler locked.
func (s *Scheduler) decide(ctx context.Context, c *cycle, req *Request, res *Result) (err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer func() {
		if p := recover(); p != nil {
			err = &Error{Kind: KindInternal, Msg: fmt.Sprintf("a scheduling plugin panicked: %v", p)}
			s.logger.LogAttrs(ctx, slog.LevelError, "scheduling plugin panicked", slog.String("request_id", req.ID),
				slog.Any("panic", p), slog.String("stack", string(debug.Stack())))
		}
		c.state.rng, c.state.unlock, c.state.lock = nil, nil, nil
	}()
	c.state.rng, c.state.unlock, c.state.lock = s.rng, s.mu.Unlock, s.mu.Lock
	res.Time = s.now()
	s.decisionSeq++
	res.DecisionID = s.decisionBase + s.decisionSeq
	if res.DecisionID == 0 {
		s.decisionSeq++
		res.DecisionID = s.decisionBase + s.decisionSeq
	}
	if err = s.admit(ctx, c, req); err != nil {
		return err
	}
	t := s.handlerTimer.start()
	err = s.handler.Run(ctx, &c.state, req, c, res)
	s.handlerTimer.done(t)
	if err == nil && res.Primary == nil {
		err = &Error{Kind: KindInternal, Msg: fmt.Sprintf("profile handler %s chose no primary profile", s.handler.TypedName())}
	}
	if err != nil {
		return err
	}
	for _, p := range s.preRequest {
		t := p.t.start()
		p.p.PreRequest(ctx, &c.state, req, res)
		p.t.done(t)
	}
	// Only a decision whose hooks all ran changes state: its effects are
	// applied together, here, as effects folded from other replicas are.
	res.arena = nil
	for i := range res.Effects {
		if p, ok := s.projections[res.Effects[i].Plugin.Name]; ok {
			p.ApplyEffect(res.DecisionID, res.Time, &res.Effects[i])
		}
	}
	return nil
}

// ResponseAttributes returns what the attribute reporters report for a
// finished response of usage u.
func (s *Scheduler) ResponseAttributes(u Usage) []Attribute {
	var out []Attribute
	for _, p := range s.plugins {
		if r, ok := p.(AttributeReporter); ok {
			out = append(out, r.ResponseAttributes(u)...)
		}
	}
	return out
}

// StateRetention is the longest state retention its plugins ask for (see
// StateRetainer); 0 if none does.
func (s *Scheduler) StateRetention() time.Duration {
	var d time.Duration
	for _, p := range s.plugins {
		if r, ok := p.(StateRetainer); ok {
			d = max(d, r.StateRetention())
		}
	}
	return d
}

// Fresh returns the projections (see Projection) that started empty: all
// of them for a first configuration; for a reload (WithPrevious), those that
// are new or could not take over their predecessor's state. Their state is
// rebuilt by replaying the decision stream.
func (s *Scheduler) Fresh() []TypedName { return s.fresh }

// ApplyEffects applies the effects of a decision taken elsewhere (another
// replica, or this one before a restart) to the plugins they name. An
// effect whose plugin is missing from this configuration, or has another
// type, is skipped (replicas may run different config versions for a
// moment); skipped counts them.
func (s *Scheduler) ApplyEffects(decisionID uint64, at time.Time, effects []Effect) (applied, skipped int) {
	for i := range effects {
		e := &effects[i]
		p, ok := s.projections[e.Plugin.Name]
		if !ok || p.TypedName().Type != e.Plugin.Type {
			skipped++
			continue
		}
		p.ApplyEffect(decisionID, at, e)
		applied++
	}
	return applied, skipped
}

// EndpointRemoved tells plugins holding per-endpoint state that an endpoint
// left the pool.
func (s *Scheduler) EndpointRemoved(name string) {
	for _, p := range s.plugins {
		if r, ok := p.(EndpointRemover); ok {
			r.EndpointRemoved(name)
		}
	}
}

// ResponseReceived runs the response-received hooks.
func (s *Scheduler) ResponseReceived(ctx context.Context, req *Request, resp *Response) {
	for _, p := range s.responseReceived {
		t := p.t.start()
		p.p.ResponseReceived(ctx, req, resp)
		p.t.done(t)
	}
}

// ResponseComplete runs the completion hooks; call it exactly once per
// scheduled request, however the request ended.
func (s *Scheduler) ResponseComplete(ctx context.Context, resp *Response) {
	for _, p := range s.responseComplete {
		t := p.t.start()
		p.p.ResponseComplete(ctx, resp)
		p.t.done(t)
	}
}

// Close releases plugins that hold resources (those implementing io.Closer).
func (s *Scheduler) Close() error {
	var first error
	for _, p := range s.plugins {
		if c, ok := p.(io.Closer); ok {
			if err := c.Close(); err != nil && first == nil {
				first = fmt.Errorf("close plugin %s: %w", p.TypedName(), err)
			}
		}
	}
	return first
}

// cycle is the pooled working set of one Schedule call.
type cycle struct {
	s          *Scheduler
	req        *Request
	candidates []*Endpoint
	state      CycleState
	result     *Result
	verbose    bool

	effects     []Effect // backs result.Effects
	effectNames []string // backs the effects' endpoint names

	prs       []*ProfileResult // reusable profile results; prs[:used] are live
	used      int
	profiles  []*ProfileResult // backs result.Profiles
	bufA      []*Endpoint      // filter outputs alternate between bufA and bufB
	bufB      []*Endpoint
	pickedIdx []int
}

func (c *cycle) begin(ctx context.Context, req *Request, candidates []*Endpoint, res *Result) {
	c.req = req
	c.candidates = candidates
	c.result = res
	res.arena = c
	c.verbose = c.s.logger.Enabled(ctx, telemetry.LevelRequest)
}

// release resets the cycle, dropping every reference to endpoints and
// requests so a pooled cycle pins nothing, and returns it to the pool.
func (c *cycle) release() {
	c.state.reset()
	for _, pr := range c.prs[:c.used] {
		pr.reset()
		clear(pr.Endpoints[:cap(pr.Endpoints)])
		clear(pr.Targets[:cap(pr.Targets)])
	}
	c.used = 0
	clear(c.profiles)
	c.profiles = c.profiles[:0]
	clear(c.effects)
	c.effects = c.effects[:0]
	clear(c.effectNames)
	c.effectNames = c.effectNames[:0]
	clear(c.bufA[:cap(c.bufA)])
	clear(c.bufB[:cap(c.bufB)])
	c.req, c.candidates, c.result = nil, nil, nil
	c.s.pool.Put(c)
}

func (c *cycle) nextResult() *ProfileResult {
	if c.used == len(c.prs) {
		c.prs = append(c.prs, &ProfileResult{})
	}
	pr := c.prs[c.used]
	c.used++
	pr.reset()
	return pr
}

// reset empties a profile result for reuse, keeping its arrays.
func (r *ProfileResult) reset() {
	r.Profile, r.Err, r.profile = "", nil, nil
	r.Endpoints = r.Endpoints[:0]
	r.Totals = r.Totals[:0]
	r.Targets = r.Targets[:0]
	r.scores = r.scores[:0]
}

// sameArray reports whether a and b share a backing array (their full
// extents end at the same element).
func sameArray(a, b []*Endpoint) bool {
	return cap(a) > 0 && cap(b) > 0 && &a[:cap(a)][cap(a)-1] == &b[:cap(b)][cap(b)-1]
}

// RunProfile runs one profile over the cycle's candidates (ProfileRunner).
func (c *cycle) RunProfile(ctx context.Context, name string) (*ProfileResult, error) {
	p, ok := c.s.profiles[name]
	if !ok {
		return nil, &Error{Kind: KindInternal, Profile: name, Msg: "no such profile"}
	}
	pr := c.nextResult()
	pr.Profile, pr.profile = name, p
	c.profiles = append(c.profiles, pr)
	c.result.Profiles = c.profiles
	req, cs := c.req, &c.state

	eps := c.candidates
	if len(p.filters) > 0 {
		n := len(eps)
		if cap(c.bufA) < n {
			c.bufA = make([]*Endpoint, 0, n)
			c.bufB = make([]*Endpoint, 0, n)
		}
		for i, f := range p.filters {
			// write into whichever buffer does not hold the input (a filter
			// may hand back its input, or part of it)
			dst := c.bufA[:0]
			if sameArray(eps, c.bufA) {
				dst = c.bufB[:0]
			}
			t := p.filterTimers[i].start()
			eps = f.Filter(ctx, cs, req, eps, dst)
			p.filterTimers[i].done(t)
			if len(eps) == 0 {
				pr.Err = filteredOut(name, f, len(c.candidates))
				return pr, pr.Err
			}
		}
	}
	pr.Endpoints = append(pr.Endpoints[:0], eps...)
	eps = pr.Endpoints
	n := len(eps)

	pr.Totals = grow(pr.Totals, n)
	pr.scores = grow(pr.scores, n*len(p.scorers))
	totals := pr.Totals
	for si := range p.scorers {
		sc := &p.scorers[si]
		row := pr.scores[si*n : (si+1)*n]
		if c.verbose {
			c.s.logger.LogAttrs(ctx, telemetry.LevelRequest, "Running scorer", sc.name, slog.String("request_id", req.ID), slog.String("profile", name))
		}
		t := sc.timer.start()
		sc.Score(ctx, cs, req, eps, row)
		sc.timer.done(t)
		w := sc.weight
		for i, v := range row {
			// clamp to [0, 1]; NaN counts as 0
			if !(v > 0) {
				v = 0
			} else if v > 1 {
				v = 1
			}
			row[i] = v
			totals[i] += w * v
		}
	}

	t := p.pickerTimer.start()
	c.pickedIdx = p.picker.Pick(ctx, cs, req, eps, totals, c.pickedIdx[:0])
	p.pickerTimer.done(t)
	if len(c.pickedIdx) == 0 {
		pr.Err = &Error{Kind: KindShed, Profile: name, Msg: fmt.Sprintf("picker %s chose no endpoint", p.picker.TypedName())}
		return pr, pr.Err
	}
	for _, i := range c.pickedIdx {
		if i < 0 || i >= n {
			pr.Targets = pr.Targets[:0]
			pr.Err = &Error{Kind: KindInternal, Profile: name, Msg: fmt.Sprintf("picker %s returned index %d of %d endpoints", p.picker.TypedName(), i, n)}
			return pr, pr.Err
		}
		pr.Targets = append(pr.Targets, Target{Endpoint: eps[i], Port: eps[i].Port})
	}
	return pr, nil
}

// filteredOut is the error of a profile whose filter f removed the last of
// the endpoints (ready is how many the cycle started with): the request is
// shed when f filters by load (LoadShedder), else no endpoint matched.
func filteredOut(profile string, f Filter, ready int) *Error {
	tn := f.TypedName()
	name := tn.Name
	if name == "" {
		name = tn.Type
	}
	if _, ok := f.(LoadShedder); ok {
		return &Error{Kind: KindShed, Profile: profile, Filter: name, Msg: fmt.Sprintf("filter %s left no endpoints", tn)}
	}
	return &Error{Kind: KindNoMatch, Profile: profile, Filter: name,
		Msg: fmt.Sprintf("no endpoint matched: filter %s left none of the %d ready endpoints", tn, ready)}
}

// grow returns s resized to n zeroed elements, reusing its array if it fits.
func grow(s []float64, n int) []float64 {
	if cap(s) < n {
		return make([]float64, n)
	}
	s = s[:n]
	clear(s)
	return s
}
