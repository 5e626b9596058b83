package scheduling

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/hermod/hermod/libs/telemetry"
)

// Scheduler runs scheduling cycles for one pool with one configuration. It is
// safe for concurrent use. The profiles, scorers, picker and pre-request
// hooks of a cycle run in one critical section, so stateful plugins (in-flight
// counts, LRUs) see every earlier decision: request n+1 sees request n even
// in a burst. Prepare-data plugins run before it, concurrently.
type Scheduler struct {
	mu  sync.Mutex
	rng *rand.Rand // guarded by mu

	handler      ProfileHandler
	handlerTimer pluginTimer
	profiles     map[string]*profile
	profileOrder []string

	plugins           []Plugin
	prepare           []timed[PrepareData]
	preRequest        []timed[PreRequest]
	responseReceived  []timed[ResponseReceived]
	responseStreaming []timed[ResponseStreaming]
	responseComplete  []timed[ResponseComplete]

	logger  *slog.Logger
	metrics *SchedulerMetrics
	now     func() time.Time
	desc    *Resolved
	pool    sync.Pool
}

type timed[T any] struct {
	p T
	t pluginTimer
}

type profile struct {
	name    string
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

// Schedule picks the endpoints that serve req among candidates. On success
// the Result's Primary target serves the request. Errors are *Error values
// whose kind maps to 503 (no candidates), 429 (every endpoint filtered out)
// or 400 (bad request). The caller may Release the result when done with it.
func (s *Scheduler) Schedule(ctx context.Context, req *Request, candidates []*Endpoint) (*Result, error) {
	var start time.Time
	if s.metrics != nil {
		start = time.Now()
	}
	if len(candidates) == 0 {
		err := &Error{Kind: KindNoCandidates, Msg: "no ready endpoints in the pool"}
		s.metrics.cycleDone(start, err)
		return nil, err
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
	c.begin(ctx, req, candidates)
	res := &c.result

	s.mu.Lock()
	c.state.rng = s.rng
	t := s.handlerTimer.start()
	err := s.handler.Run(ctx, &c.state, req, c, res)
	s.handlerTimer.done(t)
	if err == nil && res.Primary == nil {
		err = &Error{Kind: KindInternal, Msg: fmt.Sprintf("profile handler %s chose no primary profile", s.handler.TypedName())}
	}
	if err == nil {
		for _, p := range s.preRequest {
			t := p.t.start()
			p.p.PreRequest(ctx, &c.state, req, res)
			p.t.done(t)
		}
	}
	c.state.rng = nil
	s.mu.Unlock()

	s.metrics.cycleDone(start, err)
	if err != nil {
		c.release()
		return nil, err
	}
	return res, nil
}

// ResponseReceived runs the response-received hooks.
func (s *Scheduler) ResponseReceived(ctx context.Context, req *Request, resp *Response) {
	for _, p := range s.responseReceived {
		t := p.t.start()
		p.p.ResponseReceived(ctx, req, resp)
		p.t.done(t)
	}
}

// ResponseStreaming runs the streaming hooks for one chunk.
func (s *Scheduler) ResponseStreaming(ctx context.Context, req *Request, resp *Response, chunk []byte) {
	for _, p := range s.responseStreaming {
		t := p.t.start()
		p.p.ResponseStreaming(ctx, req, resp, chunk)
		p.t.done(t)
	}
}

// ResponseComplete runs the completion hooks; call it exactly once per
// scheduled request, however the request ended.
func (s *Scheduler) ResponseComplete(ctx context.Context, req *Request, resp *Response) {
	for _, p := range s.responseComplete {
		t := p.t.start()
		p.p.ResponseComplete(ctx, req, resp)
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
	ctx        context.Context
	req        *Request
	candidates []*Endpoint
	state      CycleState
	result     Result
	verbose    bool

	prs       []*ProfileResult // reusable profile results; prs[:used] are live
	used      int
	bufA      []*Endpoint
	bufB      []*Endpoint
	pickedIdx []int
}

func (c *cycle) begin(ctx context.Context, req *Request, candidates []*Endpoint) {
	c.ctx = ctx
	c.req = req
	c.candidates = candidates
	c.result.RequestID = req.ID
	c.result.cycle = c
	c.verbose = c.s.logger.Enabled(ctx, telemetry.LevelRequest)
}

func (c *cycle) release() {
	c.state.reset()
	for _, pr := range c.prs[:c.used] {
		pr.Profile, pr.Err, pr.profile = "", nil, nil
		clear(pr.Endpoints)
		pr.Endpoints = pr.Endpoints[:0]
		clear(pr.Targets)
		pr.Targets = pr.Targets[:0]
	}
	c.used = 0
	clear(c.bufA)
	clear(c.bufB)
	h, rm, profiles := c.result.Headers, c.result.RemoveHeaders, c.result.Profiles
	clear(h)
	clear(profiles)
	c.result = Result{Headers: h, RemoveHeaders: rm[:0], Profiles: profiles[:0]}
	c.ctx, c.req, c.candidates = nil, nil, nil
	c.s.pool.Put(c)
}

func (c *cycle) nextResult() *ProfileResult {
	if c.used == len(c.prs) {
		c.prs = append(c.prs, &ProfileResult{})
	}
	pr := c.prs[c.used]
	c.used++
	return pr
}

// RunProfile runs one profile over the cycle's candidates (ProfileRunner).
func (c *cycle) RunProfile(ctx context.Context, name string) (*ProfileResult, error) {
	p, ok := c.s.profiles[name]
	if !ok {
		return nil, &Error{Kind: KindInternal, Profile: name, Msg: "no such profile"}
	}
	pr := c.nextResult()
	pr.Profile, pr.profile = name, p
	c.result.Profiles = append(c.result.Profiles, pr)
	req, cs := c.req, &c.state

	eps := c.candidates
	if len(p.filters) > 0 {
		n := len(eps)
		if cap(c.bufA) < n {
			c.bufA = make([]*Endpoint, 0, n)
			c.bufB = make([]*Endpoint, 0, n)
		}
		for i, f := range p.filters {
			dst := c.bufA[:0]
			if i%2 == 1 {
				dst = c.bufB[:0]
			}
			t := p.filterTimers[i].start()
			eps = f.Filter(ctx, cs, req, eps, dst)
			p.filterTimers[i].done(t)
			if len(eps) == 0 {
				pr.Err = &Error{Kind: KindShed, Profile: name, Msg: fmt.Sprintf("filter %s left no endpoints", f.TypedName())}
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
			pr.Err = &Error{Kind: KindInternal, Profile: name, Msg: fmt.Sprintf("picker %s returned index %d of %d endpoints", p.picker.TypedName(), i, n)}
			return pr, pr.Err
		}
		pr.Targets = append(pr.Targets, Target{Endpoint: eps[i], Port: eps[i].Port})
	}
	return pr, nil
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
