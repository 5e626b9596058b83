package scheduling

import (
	"sync/atomic"
	"time"
)

// ProfileResult is the outcome of running one scheduling profile.
type ProfileResult struct {
	// Profile is the profile's name.
	Profile string
	// Endpoints are the endpoints the filters kept, in candidate order; the
	// score rows and Totals are indexed like it.
	Endpoints []*Endpoint
	// Totals[i] is the weighted sum of Endpoints[i]'s clamped scores.
	Totals []float64
	// Targets are the picker's choices, best first: Targets[0] is the
	// target, the rest are fallbacks.
	Targets []Target
	// Err is why the profile failed, nil if it picked targets.
	Err error

	profile *profile
	scores  []float64 // scorer-major: scores[s*len(Endpoints)+i]
}

// Scorers returns the profile's scorers (name, type, weight), in the order
// the rows of Score are.
func (r *ProfileResult) Scorers() []ScorerInfo { return r.profile.scorerInfo }

// Score returns the clamped score scorer s gave Endpoints[i].
func (r *ProfileResult) Score(s, i int) float64 {
	return r.scores[s*len(r.Endpoints)+i]
}

// Target returns the first target; ok is false when the profile picked none.
func (r *ProfileResult) Target() (Target, bool) {
	if r == nil || len(r.Targets) == 0 {
		return Target{}, false
	}
	return r.Targets[0], true
}

// ScorerInfo describes one weighted scorer of a profile.
type ScorerInfo struct {
	Name   string  `json:"name"`
	Type   string  `json:"type"`
	Weight float64 `json:"weight"`
}

// Result is the outcome of one scheduling cycle. Each Schedule call returns
// its own Result.
type Result struct {
	// RequestID is the scheduled request's id (as the client sent it, so not
	// necessarily unique).
	RequestID string
	// DecisionID identifies this decision uniquely (never 0). Completions
	// name it: stateful plugins key per-request state by it.
	DecisionID uint64
	// Time is when the decision was taken (the scheduler's clock).
	Time time.Time
	// Profiles are the results of every profile that ran, in run order
	// (including failed optional stages, with Err set).
	Profiles []*ProfileResult
	// Primary is the result whose target serves the request (decode).
	Primary *ProfileResult
	// Prefill and Encode are the results of the disaggregated stages when
	// they ran and succeeded; nil otherwise.
	Prefill *ProfileResult
	Encode  *ProfileResult
	// Headers are set on the request forwarded to the target.
	Headers map[string]string
	// RemoveHeaders are removed from the forwarded request (client copies of
	// headers only Hermod may set).
	RemoveHeaders []string
	// Effects are what the decision changed in stateful plugins (see
	// Projection), in the order the plugins recorded them. They are valid
	// until the result is released.
	Effects []Effect

	cycle atomic.Pointer[cycle]
	arena *cycle // the deciding cycle, while the decision is taken
}

// RecordEffect records what the decision changes in plugin p's state (see
// Projection). It is called from PreRequest hooks. The endpoint names are
// copied; blocks is kept as it is and must stay unchanged until the result
// is released (a plugin's per-cycle state qualifies).
func (r *Result) RecordEffect(p Plugin, endpoints []string, blocks []uint64, capacity int64) {
	r.Record(Effect{Plugin: p.TypedName(), Endpoints: endpoints, Blocks: blocks, Capacity: capacity})
}

// Record records an effect as RecordEffect does: its endpoint names are
// copied, its Blocks and Values kept as they are (they must stay unchanged
// until the result is released).
func (r *Result) Record(e Effect) {
	endpoints := e.Endpoints
	if c := r.arena; c != nil {
		start := len(c.effectNames)
		c.effectNames = append(c.effectNames, endpoints...)
		e.Endpoints = c.effectNames[start:len(c.effectNames):len(c.effectNames)]
		c.effects = append(c.effects, e)
		r.Effects = c.effects
		return
	}
	e.Endpoints = append([]string(nil), endpoints...)
	r.Effects = append(r.Effects, e)
}

// SetHeader sets a header on the forwarded request.
func (r *Result) SetHeader(name, value string) {
	if r.Headers == nil {
		r.Headers = make(map[string]string, 2)
	}
	r.Headers[name] = value
}

// RemoveHeader strips a header from the forwarded request.
func (r *Result) RemoveHeader(name string) {
	for _, h := range r.RemoveHeaders {
		if h == name {
			return
		}
	}
	r.RemoveHeaders = append(r.RemoveHeaders, name)
}

// Predictions returns what latency predictors forecast for the endpoints
// of this cycle (nil when none ran). Valid until the result is released.
func (r *Result) Predictions() *Predictions {
	c := r.cycle.Load()
	if c == nil {
		c = r.arena
	}
	if c == nil {
		return nil
	}
	p, _ := ReadState[*Predictions](&c.state, PredictionsKey)
	return p
}

// Target returns the primary target.
func (r *Result) Target() Target {
	t, _ := r.Primary.Target()
	return t
}

// ServingNames appends the names of the endpoints that serve the request:
// the primary target, then the prefill target of a disaggregated request.
// Stateful plugins record their effects on them.
func (r *Result) ServingNames(dst []string) []string {
	for _, pr := range []*ProfileResult{r.Primary, r.Prefill} {
		if t, ok := pr.Target(); ok {
			dst = append(dst, t.Endpoint.Name)
		}
	}
	return dst
}

// Result returns the result of the named profile, if it ran.
func (r *Result) Result(profile string) *ProfileResult {
	for _, p := range r.Profiles {
		if p.Profile == profile {
			return p
		}
	}
	return nil
}

// Release returns the result's buffers for reuse by later cycles. The
// profile results reached from it must not be used afterwards. Calling it is
// optional (an unreleased result is garbage collected); calling it again, or
// from several goroutines, is harmless.
func (r *Result) Release() {
	if c := r.cycle.Swap(nil); c != nil {
		c.release()
	}
}
