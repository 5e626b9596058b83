// Package disaggrollout holds disaggregatedset-rollout-screener, the llm-d
// router's guard for rollouts of a DisaggregatedSet (LeaderWorkerSet's
// prefill/decode deployment, every role of which moves to a new revision
// together): a prefill pod and a decode pod serve the same request only
// when their revision labels are equal, since two revisions may not agree
// on the KV-cache layout or its transfer.
//
// Before any profile runs, the screener (a scheduling.Screener) counts the
// Ready pods of the candidates by revision and role, among the pods its
// scope selects; drops every revision missing a Ready pod of a required
// role; draws one of the others at random, weighted by its Ready pods
// (sum: of every required role; max-role: of the role with the most pods
// across the revisions); and hands the profiles only that revision's
// endpoints, so that prefill and decode cannot pick different revisions.
// A request that names a revision itself (a strict header selector) gets
// no draw: only the endpoints whose label equals its header, when their
// revision is covered. When nothing is left the request fails (503): it
// never crosses revisions. Every header selector also sets its header on
// the response to the serving endpoint's label.
//
// Upstream the screener watches the pods through a Kubernetes notification
// source. Here the Ready pods are the pool's endpoints: the collector's
// Kubernetes discovery registers exactly the Ready pods of the pool, with
// their labels, and the picker's candidates are those registered, serving
// the request's model (and in its subset, when Envoy sends one). So a
// role's pods count only when they are in the pool, and a pod that is not
// Ready has no endpoint to count; one pod's data-parallel ranks count once.
package disaggrollout

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/libs/telemetry"
)

// Type is the plugin type.
const Type = "disaggregatedset-rollout-screener"

func init() {
	scheduling.Register(scheduling.Registration{Type: Type, New: New})
}

// Screener is disaggregatedset-rollout-screener.
type Screener struct {
	scheduling.Named
	params   Params
	scope    selector
	gating   bool
	maxRole  bool
	roles    []string // the required roles
	revLabel string
	role     string // the role label key
	strict   []HeaderSelector

	// draw is the random draw in [0, 1) that chooses a revision.
	draw func() float64

	mu    sync.Mutex // serialises recomputing the distribution
	cache atomic.Pointer[cached]

	share   *prometheus.GaugeVec
	noMatch *prometheus.CounterVec
}

// cached is the distribution of the last candidate set seen, and the
// covered revision of each of its endpoints (an index into
// d.revisions; -1 when its revision is not covered).
type cached struct {
	eps []*scheduling.Endpoint
	d   *distribution
	rev []int
}

// distribution is how a candidate set's Ready pods spread over revisions.
type distribution struct {
	// pods are the Ready pods by revision and role.
	pods map[string]map[string]int
	// revisions are the covered revisions, sorted; shares their shares of
	// the traffic (summing to 1), index for index.
	revisions []string
	shares    []float64
}

// share is a revision's share (0: not covered).
func (d *distribution) share(rev string) float64 {
	if i, ok := slices.BinarySearch(d.revisions, rev); ok {
		return d.shares[i]
	}
	return 0
}

// pick returns the index of the revision draw (in [0, 1)) falls on; -1
// when no revision is covered.
func (d *distribution) pick(draw float64) int {
	sum := 0.0
	for i := range d.revisions {
		sum += d.shares[i]
		if draw < sum {
			return i
		}
	}
	return len(d.revisions) - 1
}

// New builds a disaggregatedset-rollout-screener.
func New(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
	var p Params
	if err := scheduling.DecodeParameters(raw, &p, h); err != nil {
		return nil, err
	}
	scope, err := p.check()
	if err != nil {
		return nil, err
	}
	s := &Screener{
		Named: scheduling.Named{Type: Type, Name: name}, params: p, scope: scope,
		gating: p.RevisionGating.gating(), maxRole: p.RevisionGating.Mode == GatingMaxRole,
		revLabel: p.RevisionGating.RevisionLabelKey, role: p.RevisionGating.RoleLabelKey,
		draw: rand.Float64,
		share: scheduling.Metric(h, telemetry.NewGaugeVec("llm_d_epp_disaggregatedset_revision_gating_share",
			"[ALPHA] Share of the traffic disaggregatedset-rollout-screener gives each revision of its last candidate set, 0 to 1; a revision missing a required role has 0.",
			"plugin_type", "plugin_name", "mode", "revision")),
		noMatch: scheduling.Metric(h, telemetry.NewCounterVec("llm_d_epp_disaggregatedset_strict_header_no_match_total",
			"[ALPHA] Requests whose strict header selector matched no endpoint, so that they failed.",
			"plugin_type", "plugin_name", "selector")),
	}
	if s.gating {
		s.roles = p.RevisionGating.RequireRoles.Values
	}
	for _, hs := range p.HeaderSelectors {
		if hs.Mode == ModeStrict {
			s.strict = append(s.strict, hs)
		}
	}
	return s, nil
}

// Parameters implements scheduling.ParameterReporter.
func (s *Screener) Parameters() any { return s.params }

// Screen implements scheduling.Screener.
func (s *Screener) Screen(_ context.Context, req *scheduling.Request, in, dst []*scheduling.Endpoint) []*scheduling.Endpoint {
	start := len(dst)
	if !s.gating {
		dst = append(dst, in...)
	} else {
		c := s.distributionOf(in)
		chosen := -1 // any covered revision
		if !s.pinned(req) {
			chosen = c.d.pick(s.draw())
		}
		for i, e := range in {
			if r := c.rev[i]; r >= 0 && (chosen < 0 || r == chosen) {
				dst = append(dst, e)
			}
		}
	}
	for _, hs := range s.strict {
		if len(dst) == start {
			break
		}
		want := req.Header(hs.HeaderName)
		if want == "" {
			continue
		}
		kept := slices.DeleteFunc(dst[start:], func(e *scheduling.Endpoint) bool { return e.Labels[hs.LabelKey] != want })
		dst = dst[:start+len(kept)]
		if len(kept) == 0 {
			s.noMatch.WithLabelValues(Type, s.Name, hs.Name).Inc()
		}
	}
	return dst
}

// pinned reports whether the request names a value of a strict selector:
// it then gets no revision drawn for it.
func (s *Screener) pinned(req *scheduling.Request) bool {
	for _, hs := range s.strict {
		if req.Header(hs.HeaderName) != "" {
			return true
		}
	}
	return false
}

// ResponseReceived implements scheduling.ResponseReceived: every header
// selector's header gets the serving endpoint's label (when it has one).
func (s *Screener) ResponseReceived(_ context.Context, _ *scheduling.Request, resp *scheduling.Response) {
	e := resp.Target.Endpoint
	if e == nil {
		return
	}
	for _, hs := range s.params.HeaderSelectors {
		if v := e.Labels[hs.LabelKey]; v != "" {
			resp.SetHeader(hs.HeaderName, v)
		}
	}
}

// distributionOf returns the distribution of a candidate set: the cached
// one while the set is the last one seen (endpoints are immutable
// snapshots, so the same pointers are the same pods and labels).
func (s *Screener) distributionOf(in []*scheduling.Endpoint) *cached {
	if c := s.cache.Load(); c != nil && slices.Equal(c.eps, in) {
		return c
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.cache.Load(); c != nil && slices.Equal(c.eps, in) {
		return c
	}
	d := s.compute(in)
	c := &cached{eps: slices.Clone(in), d: d, rev: make([]int, len(in))}
	for i, e := range in {
		c.rev[i] = -1
		if r, ok := slices.BinarySearch(d.revisions, e.Labels[s.revLabel]); ok {
			c.rev[i] = r
		}
	}
	s.cache.Store(c)
	s.share.DeletePartialMatch(prometheus.Labels{"plugin_type": Type, "plugin_name": s.Name})
	for rev := range d.pods {
		s.share.WithLabelValues(Type, s.Name, s.params.RevisionGating.Mode, rev).Set(d.share(rev))
	}
	return c
}

// compute counts the Ready pods of in by revision and role and weighs the
// covered revisions.
func (s *Screener) compute(in []*scheduling.Endpoint) *distribution {
	type podKey struct{ rev, role, address, pod string }
	var ranks map[podKey]struct{} // the pods of the data-parallel ranks seen
	d := &distribution{pods: map[string]map[string]int{}}
	for _, e := range in {
		rev, role := e.Labels[s.revLabel], e.Labels[s.role]
		if rev == "" || role == "" || !s.scope.matches(e.Labels) {
			continue
		}
		if pod := podOf(e.Name); pod != e.Name {
			k := podKey{rev, role, e.Address, pod}
			if _, dup := ranks[k]; dup {
				continue
			}
			if ranks == nil {
				ranks = map[podKey]struct{}{}
			}
			ranks[k] = struct{}{}
		}
		if d.pods[rev] == nil {
			d.pods[rev] = map[string]int{}
		}
		d.pods[rev][role]++
	}
	covered := func(perRole map[string]int) bool {
		for _, r := range s.roles {
			if perRole[r] == 0 {
				return false
			}
		}
		return true
	}
	for rev, perRole := range d.pods {
		if covered(perRole) {
			d.revisions = append(d.revisions, rev)
		}
	}
	slices.Sort(d.revisions)
	weigh := func(perRole map[string]int) int {
		n := 0
		for _, r := range s.roles {
			n += perRole[r]
		}
		return n
	}
	if s.maxRole {
		dominant, most := "", -1
		for _, r := range s.roles {
			n := 0
			for _, rev := range d.revisions {
				n += d.pods[rev][r]
			}
			if n > most { // the first listed wins a tie
				dominant, most = r, n
			}
		}
		weigh = func(perRole map[string]int) int { return perRole[dominant] }
	}
	total := 0
	weights := make([]int, len(d.revisions))
	for i, rev := range d.revisions {
		weights[i] = weigh(d.pods[rev])
		total += weights[i]
	}
	d.shares = make([]float64, len(d.revisions))
	for i, w := range weights {
		if total > 0 {
			d.shares[i] = float64(w) / float64(total)
		}
	}
	return d
}

// podOf is the pod an endpoint name belongs to (with the endpoint's
// address, it identifies the pod): the name without the -rank<N> suffix
// Hermod gives a pod's data-parallel ranks.
func podOf(name string) string {
	if i := strings.LastIndex(name, "-rank"); i > 0 {
		if _, err := strconv.Atoi(name[i+len("-rank"):]); err == nil {
			return name[:i]
		}
	}
	return name
}

var (
	_ scheduling.Screener          = (*Screener)(nil)
	_ scheduling.ResponseReceived  = (*Screener)(nil)
	_ scheduling.ParameterReporter = (*Screener)(nil)
)
