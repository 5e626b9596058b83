package disaggrollout

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	_ "github.com/hermod/hermod/libs/plugins/decider"
	_ "github.com/hermod/hermod/libs/plugins/filter"
	_ "github.com/hermod/hermod/libs/plugins/picker"
	_ "github.com/hermod/hermod/libs/plugins/profilehandler"
	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/libs/scheduling/schedulingtest"
)

var ctx = context.Background()

// fleet builds pods labelled as a DisaggregatedSet's: counts[rev][role] of
// each, named rev-role-i, at distinct addresses, in the set "my-set".
func fleet(counts map[string]map[string]int) []*scheduling.Endpoint {
	var eps []*scheduling.Endpoint
	n := 0
	for _, rev := range []string{"rev-a", "rev-b", "rev-c"} {
		for _, role := range []string{"prefill", "decode"} {
			for i := range counts[rev][role] {
				n++
				eps = append(eps, scheduling.NewEndpoint(fmt.Sprintf("%s-%s-%d", rev, role, i), fmt.Sprintf("10.1.%d.%d", n/250, n%250), 8000, map[string]string{
					"disaggregatedset.x-k8s.io/name":  "my-set",
					DefaultRevisionLabel:              rev,
					DefaultRoleLabel:                  role,
					"llm-d.ai/role":                   role,
					"disaggregatedset.x-k8s.io/slice": fmt.Sprintf("slice-%d", i%2),
				}))
			}
		}
	}
	return eps
}

func newScreener(t *testing.T, params string) (*Screener, *schedulingtest.Handle) {
	t.Helper()
	h := schedulingtest.NewHandle()
	return schedulingtest.New[*Screener](t, h, Type, "rollout", params), h
}

const maxRoleParams = `{"scope": {"labelSelector": "disaggregatedset.x-k8s.io/name=my-set"},
 "headerSelectors": [
  {"name": "revision", "headerName": "X-Disagg-Revision", "labelKey": "disaggregatedset.x-k8s.io/revision", "mode": "strict"},
  {"name": "slice", "headerName": "x-disagg-slice", "labelKey": "disaggregatedset.x-k8s.io/slice", "mode": "prefer"}],
 "revisionGating": {"mode": "max-role", "requireRoles": {"values": ["prefill", "decode"]}}}`

func sumParams(roles string) string {
	return `{"scope": {"labelSelector": "disaggregatedset.x-k8s.io/name=my-set"}, "revisionGating": {"mode": "sum", "requireRoles": {"values": ` + roles + `}}}`
}

// The shares of the upstream documentation's 2P:10D rollout: a revision
// missing a role gets nothing; max-role weighs by the role with the most
// Ready pods across the covered revisions, sum by all required roles.
func TestShares(t *testing.T) {
	maxRole, _ := newScreener(t, maxRoleParams)
	sum, _ := newScreener(t, sumParams(`["prefill", "decode"]`))
	for _, tc := range []struct {
		name          string
		a, b          map[string]int
		maxRoleShareA float64
		sumShareA     float64
	}{
		{"mid-rollout 2P9D/1P1D", map[string]int{"prefill": 2, "decode": 9}, map[string]int{"prefill": 1, "decode": 1}, 0.9, 11.0 / 13},
		{"step 2: new revision has no prefill", map[string]int{"prefill": 2, "decode": 8}, map[string]int{"decode": 2}, 1, 1},
		{"step 3", map[string]int{"prefill": 1, "decode": 6}, map[string]int{"decode": 2}, 1, 1},
		{"step 4", map[string]int{"prefill": 1, "decode": 6}, map[string]int{"prefill": 1, "decode": 4}, 0.6, 7.0 / 12},
		{"step 6", map[string]int{"prefill": 1, "decode": 4}, map[string]int{"prefill": 1, "decode": 6}, 0.4, 5.0 / 12},
		{"step 8", map[string]int{"prefill": 1, "decode": 2}, map[string]int{"prefill": 1, "decode": 8}, 0.2, 3.0 / 12},
		{"step 10: old revision gone", map[string]int{}, map[string]int{"prefill": 2, "decode": 10}, 0, 0},
	} {
		eps := fleet(map[string]map[string]int{"rev-a": tc.a, "rev-b": tc.b})
		for _, c := range []struct {
			s    *Screener
			want float64
		}{{maxRole, tc.maxRoleShareA}, {sum, tc.sumShareA}} {
			d := c.s.compute(eps)
			wantB := 1 - c.want
			if tc.b["prefill"] == 0 {
				wantB = 0
			}
			if a, b := d.share("rev-a"), d.share("rev-b"); math.Abs(a-c.want) > 1e-12 || math.Abs(b-wantB) > 1e-12 {
				t.Errorf("%s, %s: shares a %v b %v, want %v %v", tc.name, c.s.params.RevisionGating.Mode, a, b, c.want, wantB)
			}
		}
	}
}

// max-role's dominant role is chosen once for every revision; equal totals
// go to the role listed first.
func TestMaxRoleDominantRole(t *testing.T) {
	// prefill-heavy: 10P:2D in a, 2P:2D in b; prefill dominates (12 > 4)
	eps := fleet(map[string]map[string]int{"rev-a": {"prefill": 10, "decode": 2}, "rev-b": {"prefill": 2, "decode": 2}})
	s, _ := newScreener(t, maxRoleParams)
	if d := s.compute(eps); math.Abs(d.share("rev-a")-10.0/12) > 1e-12 {
		t.Errorf("prefill-heavy share of a %v, want 10/12", d.share("rev-a"))
	}
	// a tie (3 prefill, 3 decode in all): the first listed role decides
	eps = fleet(map[string]map[string]int{"rev-a": {"prefill": 2, "decode": 1}, "rev-b": {"prefill": 1, "decode": 2}})
	first, _ := newScreener(t, strings.Replace(maxRoleParams, `["prefill", "decode"]`, `["decode", "prefill"]`, 1))
	if d := first.compute(eps); math.Abs(d.share("rev-a")-1.0/3) > 1e-12 {
		t.Errorf("decode listed first: share of a %v, want 1/3", d.share("rev-a"))
	}
	if d := s.compute(eps); math.Abs(d.share("rev-a")-2.0/3) > 1e-12 {
		t.Errorf("prefill listed first: share of a %v, want 2/3", d.share("rev-a"))
	}
}

// Only the pods the scope selects count; endpoints missing the revision or
// role label count for nothing; a pod's data-parallel ranks count once.
func TestWhatCounts(t *testing.T) {
	eps := fleet(map[string]map[string]int{"rev-a": {"prefill": 1, "decode": 1}, "rev-b": {"prefill": 1, "decode": 1}})
	// rev-b's prefill pod belongs to another set: rev-b is not covered
	eps[2].Labels = map[string]string{"disaggregatedset.x-k8s.io/name": "other", DefaultRevisionLabel: "rev-b", DefaultRoleLabel: "prefill"}
	// rev-a has a decode pod with four ranks and one without a role label
	for r := range 4 {
		eps = append(eps, scheduling.NewEndpoint(fmt.Sprintf("big-decode-rank%d", r), "10.9.0.1", 8000+r, map[string]string{
			"disaggregatedset.x-k8s.io/name": "my-set", DefaultRevisionLabel: "rev-a", DefaultRoleLabel: "decode"}))
	}
	eps = append(eps, scheduling.NewEndpoint("norole", "10.9.0.2", 8000, map[string]string{"disaggregatedset.x-k8s.io/name": "my-set", DefaultRevisionLabel: "rev-a"}))
	s, _ := newScreener(t, maxRoleParams)
	d := s.compute(eps)
	if d.pods["rev-a"]["decode"] != 2 || d.pods["rev-a"]["prefill"] != 1 || d.pods["rev-b"]["prefill"] != 0 {
		t.Errorf("pods %v", d.pods)
	}
	if d.share("rev-a") != 1 || d.share("rev-b") != 0 {
		t.Errorf("shares a %v b %v", d.share("rev-a"), d.share("rev-b"))
	}
	// the request gets every endpoint of rev-a's revision: each rank, and
	// the one without a role label (it counts for no role, but serves
	// the revision drawn)
	got := s.Screen(ctx, &scheduling.Request{ID: "r"}, eps, nil)
	for _, e := range got {
		if e.Labels[DefaultRevisionLabel] != "rev-a" {
			t.Errorf("kept %s of %s", e.Name, e.Labels[DefaultRevisionLabel])
		}
	}
	if len(got) != 2+4+1 {
		t.Errorf("kept %v", schedulingtest.Names(got))
	}
}

// A request without a strict header gets one revision, drawn by share,
// and only its endpoints; with one it gets the endpoints matching it,
// when their revision is covered, and nothing otherwise. The draw falls
// on the revisions in name order.
func TestScreen(t *testing.T) {
	eps := fleet(map[string]map[string]int{"rev-a": {"prefill": 2, "decode": 9}, "rev-b": {"prefill": 1, "decode": 1}, "rev-c": {"decode": 3}})
	s, h := newScreener(t, maxRoleParams)
	revisionsOf := func(eps []*scheduling.Endpoint) string {
		seen := map[string]bool{}
		var out []string
		for _, e := range eps {
			if r := e.Labels[DefaultRevisionLabel]; !seen[r] {
				seen[r] = true
				out = append(out, r)
			}
		}
		return strings.Join(out, ",")
	}
	for _, tc := range []struct {
		draw    float64
		headers map[string]string
		want    string // the revisions kept
		n       int    // how many endpoints
	}{
		{draw: 0, want: "rev-a", n: 11},
		{draw: 0.899, want: "rev-a", n: 11},
		{draw: 0.9, want: "rev-b", n: 2},
		{draw: 0.999, want: "rev-b", n: 2},
		// a strict header pins the revision: no draw
		{draw: 0, headers: map[string]string{"x-disagg-revision": "rev-b"}, want: "rev-b", n: 2},
		// rev-c has no prefill pod: pinning it leaves nothing
		{draw: 0, headers: map[string]string{"x-disagg-revision": "rev-c"}, want: "", n: 0},
		// a prefer header screens nothing
		{draw: 0.95, headers: map[string]string{"x-disagg-slice": "slice-1"}, want: "rev-b", n: 2},
	} {
		s.draw = func() float64 { return tc.draw }
		got := s.Screen(ctx, &scheduling.Request{ID: "r", Headers: tc.headers}, eps, nil)
		if revisionsOf(got) != tc.want || len(got) != tc.n {
			t.Errorf("draw %v headers %v: kept %v, want %d of %s", tc.draw, tc.headers, schedulingtest.Names(got), tc.n, tc.want)
		}
	}
	if got := testutil.ToFloat64(s.noMatch.WithLabelValues(Type, "rollout", "revision")); got != 1 {
		t.Errorf("strict no-match count %v, want 1", got)
	}
	// the shares are exported, rev-c (not covered) at 0
	for rev, want := range map[string]float64{"rev-a": 0.9, "rev-b": 0.1, "rev-c": 0} {
		if got := testutil.ToFloat64(s.share.WithLabelValues(Type, "rollout", GatingMaxRole, rev)); math.Abs(got-want) > 1e-12 {
			t.Errorf("share gauge of %s = %v, want %v", rev, got, want)
		}
	}
	// a revision leaving the candidates leaves the gauge
	s.Screen(ctx, &scheduling.Request{ID: "r"}, eps[:11], nil)
	if n := testutil.CollectAndCount(h.Metrics, "llm_d_epp_disaggregatedset_revision_gating_share"); n != 1 {
		t.Errorf("%d share series after rev-b and rev-c left, want 1", n)
	}
	// with no covered revision nothing is kept
	if got := s.Screen(ctx, &scheduling.Request{ID: "r"}, eps[13:], nil); len(got) != 0 {
		t.Errorf("rev-c alone: kept %v", schedulingtest.Names(got))
	}
}

// With gating disabled every candidate goes on, a strict header still
// screens, and the headers are still stamped.
func TestDisabledGating(t *testing.T) {
	eps := fleet(map[string]map[string]int{"rev-a": {"decode": 2}, "rev-b": {"prefill": 1}})
	s, _ := newScreener(t, strings.Replace(maxRoleParams, `"mode": "max-role", "requireRoles": {"values": ["prefill", "decode"]}`, `"mode": "disabled"`, 1))
	if got := s.Screen(ctx, &scheduling.Request{ID: "r"}, eps, nil); len(got) != 3 {
		t.Errorf("kept %v, want all", schedulingtest.Names(got))
	}
	if got := s.Screen(ctx, &scheduling.Request{ID: "r", Headers: map[string]string{"x-disagg-revision": "rev-b"}}, eps, nil); len(got) != 1 || got[0].Name != "rev-b-prefill-0" {
		t.Errorf("strict rev-b: kept %v", schedulingtest.Names(got))
	}
	if got := s.Screen(ctx, &scheduling.Request{ID: "r", Headers: map[string]string{"x-disagg-revision": "rev-z"}}, eps, nil); len(got) != 0 {
		t.Errorf("strict rev-z: kept %v", schedulingtest.Names(got))
	}
}

// Every header selector sets its header on the response to the serving
// endpoint's label; an endpoint without the label sets nothing.
func TestResponseHeadersAreStamped(t *testing.T) {
	s, _ := newScreener(t, maxRoleParams)
	e := fleet(map[string]map[string]int{"rev-b": {"decode": 2}})[1]
	resp := &scheduling.Response{Target: scheduling.Target{Endpoint: e}}
	s.ResponseReceived(ctx, nil, resp)
	if resp.Headers["x-disagg-revision"] != "rev-b" || resp.Headers["x-disagg-slice"] != "slice-1" || len(resp.Headers) != 2 {
		t.Errorf("headers %v", resp.Headers)
	}
	bare := &scheduling.Response{Target: scheduling.Target{Endpoint: scheduling.NewEndpoint("x", "10.0.0.1", 80, nil)}}
	s.ResponseReceived(ctx, nil, bare)
	if len(bare.Headers) != 0 {
		t.Errorf("headers of an unlabelled endpoint %v", bare.Headers)
	}
}

// Through the scheduler, with prefill/decode disaggregation: the prefill
// and the decode pod of a request are always of one revision, the
// revisions get their max-role shares of the traffic, and a request
// pinned to a revision missing a role fails with 503.
func TestDisaggregatedRequestsNeverCrossRevisions(t *testing.T) {
	s := schedulingtest.Scheduler(t, `
plugins:
- type: disaggregatedset-rollout-screener
  name: rollout-screener
  parameters:
    scope: {labelSelector: "disaggregatedset.x-k8s.io/name=my-set"}
    headerSelectors:
    - {name: revision, headerName: x-disagg-revision, labelKey: disaggregatedset.x-k8s.io/revision, mode: strict}
    revisionGating: {mode: max-role, requireRoles: {values: [prefill, decode]}}
- type: always-disagg-pd-decider
- type: prefill-filter
- type: decode-filter
- type: random-picker
- type: disagg-profile-handler
  parameters: {deciders: {prefill: always-disagg-pd-decider}}
schedulingProfiles:
- name: prefill
  plugins: [{pluginRef: prefill-filter}, {pluginRef: random-picker}]
- name: decode
  plugins: [{pluginRef: decode-filter}, {pluginRef: random-picker}]
`)
	var sc *Screener
	for _, p := range s.Plugins() {
		if v, ok := p.(*Screener); ok {
			sc = v
		}
	}
	rng := rand.New(rand.NewPCG(7, 8))
	sc.draw = rng.Float64
	eps := fleet(map[string]map[string]int{"rev-a": {"prefill": 2, "decode": 9}, "rev-b": {"prefill": 1, "decode": 1}})
	const n = 4000
	perRevision := map[string]int{}
	for i := range n {
		res, err := s.Schedule(ctx, schedulingtest.Completion(fmt.Sprintf("r%d", i), "m", "hello"), eps)
		if err != nil {
			t.Fatal(err)
		}
		d, p := res.Target().Endpoint, res.Prefill.Targets[0].Endpoint
		if d.Labels[DefaultRoleLabel] != "decode" || p.Labels[DefaultRoleLabel] != "prefill" || d.Labels[DefaultRevisionLabel] != p.Labels[DefaultRevisionLabel] {
			t.Fatalf("request %d: decode %s, prefill %s", i, d.Name, p.Name)
		}
		perRevision[d.Labels[DefaultRevisionLabel]]++
		res.Release()
	}
	if b := float64(perRevision["rev-b"]) / n; math.Abs(b-0.1) > 0.02 {
		t.Errorf("rev-b got %.3f of the traffic, want 0.1 (%v)", b, perRevision)
	}

	// rev-b loses its prefill pod: pinned to it, a request fails; unpinned
	// it goes to rev-a
	eps = fleet(map[string]map[string]int{"rev-a": {"prefill": 2, "decode": 9}, "rev-b": {"decode": 1}})
	pinned := schedulingtest.Completion("pinned", "m", "hello")
	pinned.Headers = map[string]string{"x-disagg-revision": "rev-b"}
	_, err := s.Schedule(ctx, pinned, eps)
	var se *scheduling.Error
	if !errors.As(err, &se) || se.HTTPStatus() != http.StatusServiceUnavailable || se.Filter != "rollout-screener" {
		t.Errorf("pinned to an uncovered revision: %v", err)
	}
	for i := range 50 {
		res, err := s.Schedule(ctx, schedulingtest.Completion(fmt.Sprintf("u%d", i), "m", "hello"), eps)
		if err != nil {
			t.Fatal(err)
		}
		if rev := res.Target().Endpoint.Labels[DefaultRevisionLabel]; rev != "rev-a" {
			t.Fatalf("routed to %s", rev)
		}
		res.Release()
	}
}

func TestParameters(t *testing.T) {
	ok := `{"scope": {"labelSelector": "app=x"}, "revisionGating": {"mode": "disabled"}}`
	s, _ := newScreener(t, ok)
	if g := s.params.RevisionGating; g.RevisionLabelKey != DefaultRevisionLabel || g.RoleLabelKey != DefaultRoleLabel {
		t.Errorf("defaults %+v", g)
	}
	sel := func(extra string) string {
		return `{"scope": {"labelSelector": "app=x"}, "revisionGating": {"mode": "disabled"}, "headerSelectors": [` + extra + `]}`
	}
	for params, want := range map[string]string{
		`{"revisionGating": {"mode": "disabled"}}`:                                          "parameters.scope.labelSelector: required",
		`{"scope": {"labelSelector": "app in (x"}, "revisionGating": {"mode": "disabled"}}`: "parameters.scope.labelSelector: not a label selector",
		`{"scope": {"labelSelector": "app=x"}}`:                                             "parameters.revisionGating: required",
		`{"scope": {"labelSelector": "app=x"}, "revisionGating": {"mode": "even"}}`:         `parameters.revisionGating.mode: "even" is not`,
		`{"scope": {"labelSelector": "app=x"}, "revisionGating": {"mode": "sum"}}`:          "parameters.revisionGating.requireRoles.values: required with mode sum",
		sumParams(`[]`):                   "parameters.revisionGating.requireRoles.values: required",
		sumParams(`["decode", ""]`):       "parameters.revisionGating.requireRoles.values[1]: empty role",
		sumParams(`["decode", "decode"]`): `parameters.revisionGating.requireRoles.values[1]: "decode" is listed twice`,
		sel(`{"headerName": "h", "labelKey": "l", "mode": "strict"}`):                                                                                   "parameters.headerSelectors[0].name: required",
		sel(`{"name": "n", "labelKey": "l", "mode": "strict"}`):                                                                                         "parameters.headerSelectors[0].headerName: required",
		sel(`{"name": "n", "headerName": "h", "mode": "strict"}`):                                                                                       "parameters.headerSelectors[0].labelKey: required",
		sel(`{"name": "n", "headerName": "h", "labelKey": "l", "mode": "soft"}`):                                                                        `parameters.headerSelectors[0].mode: "soft" is not strict or prefer`,
		sel(`{"name": "n", "headerName": "h", "labelKey": "l", "mode": "strict"}, {"name": "n", "headerName": "g", "labelKey": "l", "mode": "prefer"}`): `parameters.headerSelectors[1].name: "n" names another selector`,
		sel(`{"name": "n", "headerName": "H", "labelKey": "l", "mode": "strict"}, {"name": "m", "headerName": "h", "labelKey": "l", "mode": "prefer"}`): `parameters.headerSelectors[1].headerName: "h" is another selector's header`,
	} {
		_, err := schedulingtest.NewErr(schedulingtest.NewHandle(), Type, "x", params)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", params, err, want)
		}
	}
}

// The distribution is computed once per candidate set.
func TestDistributionIsCached(t *testing.T) {
	s, _ := newScreener(t, maxRoleParams)
	eps := fleet(map[string]map[string]int{"rev-a": {"prefill": 1, "decode": 1}})
	d1 := s.distributionOf(eps).d
	if d2 := s.distributionOf(append([]*scheduling.Endpoint(nil), eps...)).d; d2 != d1 {
		t.Error("the same candidates computed again")
	}
	if d3 := s.distributionOf(eps[:1]).d; d3 == d1 || d3.share("rev-a") != 0 {
		t.Errorf("another candidate set got %+v", d3)
	}
}

func BenchmarkScreen(b *testing.B) {
	s := schedulingtest.New[*Screener](b, schedulingtest.NewHandle(), Type, "rollout", maxRoleParams)
	eps := fleet(map[string]map[string]int{"rev-a": {"prefill": 10, "decode": 40}, "rev-b": {"prefill": 10, "decode": 40}})
	req := &scheduling.Request{ID: "r"}
	dst := make([]*scheduling.Endpoint, 0, len(eps))
	b.Run("cached", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			dst = s.Screen(ctx, req, eps, dst[:0])
		}
	})
	b.Run("recomputed", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			s.cache.Store(nil)
			dst = s.Screen(ctx, req, eps, dst[:0])
		}
	})
}
