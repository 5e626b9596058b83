package nohitlru_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hermod/hermod/libs/plugins/activerequest"
	"github.com/hermod/hermod/libs/plugins/nohitlru"
	_ "github.com/hermod/hermod/libs/plugins/picker"
	"github.com/hermod/hermod/libs/plugins/prefix"
	_ "github.com/hermod/hermod/libs/plugins/profilehandler"
	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/libs/scheduling/schedulingtest"
)

// prompt returns a prompt of n 64-character blocks (the default block size
// is 16 tokens x 4 characters) whose every block starts with tag.
func prompt(tag string, n int) string {
	var b strings.Builder
	for i := range n {
		blk := fmt.Sprintf("%s block %d ", tag, i)
		b.WriteString(blk)
		b.WriteString(strings.Repeat("x", 64-len(blk)))
	}
	return b.String()
}

// setup returns a prefix-cache-scorer and a no-hit-lru-scorer built on it.
func setup(t *testing.T, params string) (*prefix.Plugin, *nohitlru.Scorer) {
	t.Helper()
	h := schedulingtest.NewHandle()
	pp := schedulingtest.New[*prefix.Plugin](t, h, prefix.Type, "", "")
	h.Declare(pp)
	s := schedulingtest.New[*nohitlru.Scorer](t, h, nohitlru.Type, "", params)
	return pp, s
}

var coldCount int

// cold scores a fresh cold request.
func cold(s *nohitlru.Scorer, eps []*scheduling.Endpoint) []float64 {
	coldCount++
	req := schedulingtest.Completion(fmt.Sprint("cold-", coldCount), "m", prompt(fmt.Sprint("cold-", coldCount), 2))
	return schedulingtest.Score(s, schedulingtest.CycleState(1), req, eps)
}

func approxEqual(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Abs(a[i]-b[i]) > 1e-9 {
			return false
		}
	}
	return true
}

func byName(eps []*scheduling.Endpoint, names ...string) []*scheduling.Endpoint {
	all := map[string]*scheduling.Endpoint{}
	for _, e := range eps {
		all[e.Name] = e
	}
	out := make([]*scheduling.Endpoint, len(names))
	for i, n := range names {
		out[i] = all[n]
	}
	return out
}

// result builds a result whose primary profile targets primary and, if
// prefill is not nil, whose prefill profile targets prefill.
func result(candidates []*scheduling.Endpoint, primary, prefill *scheduling.Endpoint) *scheduling.Result {
	st := tick()
	res := &scheduling.Result{RequestID: "r", DecisionID: st.ID, Time: time.Unix(0, st.Nanos)}
	res.Primary = &scheduling.ProfileResult{Profile: "decode", Endpoints: candidates, Targets: []scheduling.Target{{Endpoint: primary}}}
	res.Profiles = append(res.Profiles, res.Primary)
	if prefill != nil {
		res.Prefill = &scheduling.ProfileResult{Profile: "prefill", Endpoints: candidates, Targets: []scheduling.Target{{Endpoint: prefill}}}
		res.Profiles = append(res.Profiles, res.Prefill)
	}
	return res
}

func TestDefaults(t *testing.T) {
	_, s := setup(t, "")
	if got := s.TypedName(); got.Type != "no-hit-lru-scorer" || got.Name != "no-hit-lru-scorer" {
		t.Errorf("TypedName = %+v", got)
	}
	p := s.Parameters().(nohitlru.Params)
	if p.PrefixPluginName != "prefix-cache-scorer" || p.PrefixPluginType != "prefix-cache-scorer" || p.LRUSize != 1024 {
		t.Errorf("defaults = %+v", p)
	}
	var _ scheduling.Scorer = s
	var _ scheduling.PreRequest = s
}

func TestCustomPrefixPluginName(t *testing.T) {
	h := schedulingtest.NewHandle()
	pp := schedulingtest.New[*prefix.Plugin](t, h, prefix.Type, "my-prefix", "")
	h.Declare(pp)
	s := schedulingtest.New[*nohitlru.Scorer](t, h, nohitlru.Type, "lru", `{"prefixPluginName": "my-prefix", "lruSize": 3}`)
	if p := s.Parameters().(nohitlru.Params); p.PrefixPluginName != "my-prefix" || p.LRUSize != 3 {
		t.Errorf("params = %+v", p)
	}
	if len(h.Warnings) != 0 {
		t.Errorf("warnings %q for a prefix plugin found by name", h.Warnings)
	}
}

// Without the named prefix plugin (upstream does not require it), the
// prefix plugins declared earlier stand in for it, with a warning: a
// request one of them matches is warm.
func TestMissingPrefixPluginFallsBackToTheEarlierOnes(t *testing.T) {
	h := schedulingtest.NewHandle()
	pp := schedulingtest.New[*prefix.Plugin](t, h, prefix.Type, "my-prefix", "")
	h.Declare(schedulingtest.New[*activerequest.Scorer](t, h, activerequest.Type, "", ""), pp)
	s := schedulingtest.New[*nohitlru.Scorer](t, h, nohitlru.Type, "", "")
	if len(h.Warnings) != 1 || !strings.Contains(h.Warnings[0], `"prefix-cache-scorer"`) || !strings.Contains(h.Warnings[0], "my-prefix") {
		t.Fatalf("warnings = %q, want one naming the missing plugin and its stand-in", h.Warnings)
	}
	eps := schedulingtest.Endpoints(3)
	warmPrompt := prompt("warm", 8)
	pp.Index().Add("pod-2", 100, 100, prefix.Hashes("m", []byte(warmPrompt), 64, 256, nil), tick())
	got := schedulingtest.Score(s, schedulingtest.CycleState(1), schedulingtest.Completion("w", "m", warmPrompt), eps)
	if !approxEqual(got, []float64{0.5, 0.5, 0.5}) {
		t.Errorf("warm by the stand-in: scores = %v, want 0.5 everywhere", got)
	}
}

// A prefixPluginType that differs from the named plugin's type is a
// warning: the plugin's prefix match is still used.
func TestPrefixPluginTypeMismatchWarns(t *testing.T) {
	h := schedulingtest.NewHandle()
	h.Declare(schedulingtest.New[*prefix.Plugin](t, h, prefix.Type, "", ""))
	schedulingtest.New[*nohitlru.Scorer](t, h, nohitlru.Type, "", `{"prefixPluginType": "precise-prefix-cache-scorer"}`)
	if len(h.Warnings) != 1 || !strings.Contains(h.Warnings[0], "not prefixPluginType precise-prefix-cache-scorer") {
		t.Fatalf("warnings = %q", h.Warnings)
	}
}

// With no prefix plugin at all, every request is cold: spread by recency.
func TestNoPrefixPluginEveryRequestIsCold(t *testing.T) {
	for name, h := range map[string]*schedulingtest.Handle{
		"none":           schedulingtest.NewHandle(),
		"declared later": schedulingtest.NewHandle().DeclareLater("prefix-cache-scorer"),
	} {
		t.Run(name, func(t *testing.T) {
			s := schedulingtest.New[*nohitlru.Scorer](t, h, nohitlru.Type, "", `{"prefixPluginName": "prefix-cache-scorer"}`)
			if len(h.Warnings) != 1 || !strings.Contains(h.Warnings[0], "every request counts as cold") {
				t.Fatalf("warnings = %q", h.Warnings)
			}
			eps := schedulingtest.Endpoints(3)
			s.Touch("pod-0", tick())
			s.Touch("pod-1", tick())
			got := schedulingtest.Score(s, schedulingtest.CycleState(1), schedulingtest.Completion("w", "m", prompt("any", 8)), eps)
			if !approxEqual(got, []float64{0.5, 0, 1}) {
				t.Errorf("scores = %v, want cold [0.5 0 1] (pod-2 never used, pod-0 least recently)", got)
			}
		})
	}
}

func TestPrefixPluginErrors(t *testing.T) {

	t.Run("named plugin is no prefix plugin", func(t *testing.T) {
		h := schedulingtest.NewHandle()
		other := schedulingtest.New[*activerequest.Scorer](t, h, activerequest.Type, "prefix-cache-scorer", "")
		h.Declare(other)
		_, err := schedulingtest.NewErr(h, nohitlru.Type, "", "")
		wantParamError(t, err, "parameters.prefixPluginName", "active-request-scorer")
	})

	t.Run("not a prefix matcher", func(t *testing.T) {
		h := schedulingtest.NewHandle()
		h.Declare(schedulingtest.New[*activerequest.Scorer](t, h, activerequest.Type, "ar", ""))
		_, err := schedulingtest.NewErr(h, nohitlru.Type, "", `{"prefixPluginName": "ar", "prefixPluginType": "active-request-scorer"}`)
		wantParamError(t, err, "parameters.prefixPluginName", "prefix")
	})
	t.Run("lruSize", func(t *testing.T) {
		for _, p := range []string{`{"lruSize": 0}`, `{"lruSize": -3}`, `{"lruSize": "big"}`} {
			h := schedulingtest.NewHandle()
			h.Declare(schedulingtest.New[*prefix.Plugin](t, h, prefix.Type, "", ""))
			_, err := schedulingtest.NewErr(h, nohitlru.Type, "", p)
			wantParamError(t, err, "parameters.lruSize", "")
		}
	})
}

func wantParamError(t *testing.T, err error, path, contains string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one naming %s", path)
	}
	var pe *scheduling.ParamError
	if !errors.As(err, &pe) || pe.Path != path {
		t.Errorf("error %q (%T) does not name %s", err, err, path)
	}
	if !strings.Contains(err.Error(), contains) {
		t.Errorf("error %q does not mention %q", err, contains)
	}
}

func TestColdNeverTouched(t *testing.T) {
	_, s := setup(t, "")
	eps := schedulingtest.Endpoints(4)
	if got := cold(s, eps); !approxEqual(got, []float64{1, 2.0 / 3, 1.0 / 3, 0}) {
		t.Errorf("scores = %v, want [1 2/3 1/3 0]", got)
	}
	// Candidate order decides among endpoints never sent a cold request.
	rev := byName(eps, "pod-3", "pod-2", "pod-1", "pod-0")
	if got := cold(s, rev); !approxEqual(got, []float64{1, 2.0 / 3, 1.0 / 3, 0}) {
		t.Errorf("reversed candidates: scores = %v, want [1 2/3 1/3 0]", got)
	}
	if got := cold(s, eps[:2]); !approxEqual(got, []float64{1, 0}) {
		t.Errorf("two candidates: scores = %v, want [1 0]", got)
	}
}

func TestColdSingleCandidate(t *testing.T) {
	_, s := setup(t, "")
	eps := schedulingtest.Endpoints(2)
	if got := cold(s, eps[:1]); !approxEqual(got, []float64{1}) {
		t.Errorf("untracked single candidate: %v, want [1]", got)
	}
	s.Touch("pod-0", tick())
	if got := cold(s, eps[:1]); !approxEqual(got, []float64{1}) {
		t.Errorf("tracked single candidate: %v, want [1]", got)
	}
}

func TestColdLRUOrder(t *testing.T) {
	_, s := setup(t, "")
	eps := schedulingtest.Endpoints(4)
	s.Touch("pod-0", tick())
	s.Touch("pod-2", tick())
	// order: pod-1, pod-3 (untracked), pod-0, pod-2
	if got := cold(s, eps); !approxEqual(got, []float64{1.0 / 3, 1, 0, 2.0 / 3}) {
		t.Errorf("scores = %v, want [1/3 1 0 2/3]", got)
	}
	s.Touch("pod-1", tick())
	s.Touch("pod-3", tick())
	// order: pod-0, pod-2, pod-1, pod-3
	if got := cold(s, eps); !approxEqual(got, []float64{1, 1.0 / 3, 2.0 / 3, 0}) {
		t.Errorf("all touched: scores = %v, want [1 1/3 2/3 0]", got)
	}
	// Touching again moves an endpoint to most recent.
	s.Touch("pod-0", tick())
	// order: pod-2, pod-1, pod-3, pod-0
	if got := cold(s, eps); !approxEqual(got, []float64{0, 2.0 / 3, 1, 1.0 / 3}) {
		t.Errorf("after re-touching pod-0: scores = %v, want [0 2/3 1 1/3]", got)
	}
	// Candidate order does not matter among tracked endpoints.
	sub := byName(eps, "pod-0", "pod-3", "pod-2")
	if got := cold(s, sub); !approxEqual(got, []float64{0, 0.5, 1}) {
		t.Errorf("subset pod-0,pod-3,pod-2: scores = %v, want [0 0.5 1]", got)
	}
}

// Tracked endpoints that are not candidates do not take ranks.
func TestColdIgnoresNonCandidates(t *testing.T) {
	_, s := setup(t, "")
	eps := schedulingtest.Endpoints(6)
	s.Touch("pod-4", tick())
	s.Touch("pod-1", tick())
	s.Touch("pod-5", tick())
	s.Touch("pod-0", tick())
	if got := cold(s, eps[:3]); !approxEqual(got, []float64{0, 0.5, 1}) {
		t.Errorf("scores = %v, want [0 0.5 1]", got)
	}
}

func TestLRUSizeEviction(t *testing.T) {
	_, s := setup(t, `{"lruSize": 2}`)
	eps := schedulingtest.Endpoints(4)
	s.Touch("pod-0", tick())
	s.Touch("pod-1", tick())
	s.Touch("pod-2", tick()) // evicts pod-0, the least recently touched
	// pod-0 is untracked again: it ranks with pod-3 in candidate order.
	if got := cold(s, eps); !approxEqual(got, []float64{1, 1.0 / 3, 0, 2.0 / 3}) {
		t.Errorf("scores = %v, want [1 1/3 0 2/3]", got)
	}
	// Without the eviction pod-3 (never touched) would come before pod-0.
	if got := cold(s, byName(eps, "pod-0", "pod-3", "pod-1")); !approxEqual(got, []float64{1, 0.5, 0}) {
		t.Errorf("pod-0,pod-3,pod-1: scores = %v, want [1 0.5 0]", got)
	}
	s.Touch("pod-1", tick()) // pod-1 most recent, no eviction
	s.Touch("pod-3", tick()) // evicts pod-2
	if got := cold(s, byName(eps, "pod-2", "pod-3", "pod-1")); !approxEqual(got, []float64{1, 0, 0.5}) {
		t.Errorf("pod-2,pod-3,pod-1: scores = %v, want [1 0 0.5]", got)
	}

	_, one := setup(t, `{"lruSize": 1}`)
	one.Touch("pod-0", tick())
	one.Touch("pod-1", tick()) // evicts pod-0
	if got := cold(one, byName(eps, "pod-0", "pod-2", "pod-1")); !approxEqual(got, []float64{1, 0.5, 0}) {
		t.Errorf("lruSize 1: scores = %v, want [1 0.5 0]", got)
	}
}

func TestWarmRequest(t *testing.T) {
	pp, s := setup(t, "")
	eps := schedulingtest.Endpoints(4)
	s.Touch("pod-0", tick())
	s.Touch("pod-2", tick())
	warm := prompt("warm", 8)
	pp.Index().Add("pod-3", 100, 100, prefix.Hashes("m", []byte(warm), 64, 256, nil), tick())
	for _, p := range []string{warm, warm[:64], prompt("warm", 2) + prompt("other", 5)} {
		got := schedulingtest.Score(s, schedulingtest.CycleState(1), schedulingtest.Completion("w", "m", p), eps)
		if !approxEqual(got, []float64{0.5, 0.5, 0.5, 0.5}) {
			t.Errorf("warm prompt of %d chars: scores = %v, want 0.5 everywhere", len(p), got)
		}
	}
	// Warm means some candidate holds the prefix: with the holder (pod-3)
	// not a candidate the request is cold among pod-0 (touched) and pod-1
	// (untracked, so first).
	got := schedulingtest.Score(s, schedulingtest.CycleState(1), schedulingtest.Completion("w", "m", warm), eps[:2])
	if !approxEqual(got, []float64{0, 1}) {
		t.Errorf("holder outside the candidates: scores = %v, want cold [0 1]", got)
	}
	// Another model is cold.
	got = schedulingtest.Score(s, schedulingtest.CycleState(1), schedulingtest.Completion("w", "other-model", warm), eps)
	if !approxEqual(got, []float64{1.0 / 3, 1, 0, 2.0 / 3}) {
		t.Errorf("other model: scores = %v, want cold [1/3 1 0 2/3]", got)
	}
	// A prompt shorter than one block matches nothing: cold.
	got = schedulingtest.Score(s, schedulingtest.CycleState(1), schedulingtest.Completion("w", "m", "short"), eps)
	if !approxEqual(got, []float64{1.0 / 3, 1, 0, 2.0 / 3}) {
		t.Errorf("short prompt: scores = %v, want cold [1/3 1 0 2/3]", got)
	}
}

func TestPreRequestTouchesColdTargets(t *testing.T) {
	pp, s := setup(t, "")
	eps := schedulingtest.Endpoints(4)
	ctx := context.Background()

	// Cold request: primary pod-2, prefill pod-0 (touched in that order).
	req := schedulingtest.Completion("a", "m", prompt("a", 3))
	cs := schedulingtest.CycleState(1)
	schedulingtest.PreRequest(ctx, s, cs, req, result(eps, eps[2], eps[0]))
	// order: pod-1, pod-3, pod-2, pod-0
	if got := cold(s, eps); !approxEqual(got, []float64{0, 1, 1.0 / 3, 2.0 / 3}) {
		t.Errorf("after cold request: scores = %v, want [0 1 1/3 2/3]", got)
	}

	// Warm request: nothing is touched.
	warm := prompt("warm", 3)
	pp.Index().Add("pod-2", 100, 100, prefix.Hashes("m", []byte(warm), 64, 256, nil), tick())
	schedulingtest.PreRequest(ctx, s, schedulingtest.CycleState(1), schedulingtest.Completion("b", "m", warm), result(eps, eps[1], eps[3]))
	if got := cold(s, eps); !approxEqual(got, []float64{0, 1, 1.0 / 3, 2.0 / 3}) {
		t.Errorf("after warm request: scores = %v, want unchanged [0 1 1/3 2/3]", got)
	}

	// Cold request without prefill; fallback targets are not touched.
	res := result(eps, eps[1], nil)
	res.Primary.Targets = append(res.Primary.Targets, scheduling.Target{Endpoint: eps[3]})
	schedulingtest.PreRequest(ctx, s, schedulingtest.CycleState(1), schedulingtest.Completion("c", "m", prompt("c", 3)), res)
	// order: pod-3, pod-2, pod-0, pod-1
	if got := cold(s, eps); !approxEqual(got, []float64{1.0 / 3, 0, 2.0 / 3, 1}) {
		t.Errorf("after cold request on pod-1: scores = %v, want [1/3 0 2/3 1]", got)
	}
}

// Within one cycle the scorer and the pre-request hook agree on coldness
// even though the prefix plugin records the request's blocks first.
func TestPreRequestUsesCycleMatch(t *testing.T) {
	pp, s := setup(t, "")
	eps := schedulingtest.Endpoints(3)
	ctx := context.Background()
	req := schedulingtest.Completion("a", "m", prompt("a", 3))
	cs := schedulingtest.CycleState(1)
	scores := schedulingtest.Score(s, cs, req, eps)
	if !approxEqual(scores, []float64{1, 0.5, 0}) {
		t.Fatalf("scores = %v", scores)
	}
	res := result(eps, eps[0], nil)
	schedulingtest.PreRequest(ctx, pp, cs, req, res) // declared earlier: runs first
	schedulingtest.PreRequest(ctx, s, cs, req, res)
	if got := cold(s, eps); !approxEqual(got, []float64{0, 1, 0.5}) {
		t.Errorf("scores = %v, want [0 1 0.5] (pod-0 touched)", got)
	}
	// The same prompt in a new cycle is warm.
	got := schedulingtest.Score(s, schedulingtest.CycleState(1), schedulingtest.Completion("b", "m", prompt("a", 3)), eps)
	if !approxEqual(got, []float64{0.5, 0.5, 0.5}) {
		t.Errorf("repeat: scores = %v, want 0.5 everywhere", got)
	}
}

func TestConcurrentTouchAndScore(t *testing.T) {
	_, s := setup(t, `{"lruSize": 5}`)
	eps := schedulingtest.Endpoints(8)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				s.Touch(eps[(g+i)%8].Name, tick())
				req := schedulingtest.Completion("c", "m", prompt(fmt.Sprint(g, "-", i), 1))
				scores := schedulingtest.Score(s, schedulingtest.CycleState(1), req, eps)
				sum := 0.0
				for _, v := range scores {
					sum += v
				}
				if math.Abs(sum-4) > 1e-9 { // ranks 0..7 -> 1 - r/7 sums to 4
					t.Errorf("scores %v do not form a ranking", scores)
					return
				}
			}
		}()
	}
	wg.Wait()
}

const schedulerConfig = `
apiVersion: inference.networking.x-k8s.io/v1alpha1
kind: EndpointPickerConfig
plugins:
- type: prefix-cache-scorer
- type: no-hit-lru-scorer
- type: max-score-picker
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: no-hit-lru-scorer
  - pluginRef: max-score-picker
`

// Through the whole scheduler: distinct cold prompts spread one per
// endpoint, in round-robin order, and a repeated prompt is warm.
func TestSchedulerSpreadsColdRequests(t *testing.T) {
	s := schedulingtest.Scheduler(t, schedulerConfig)
	ctx := context.Background()
	const n = 5
	eps := schedulingtest.Endpoints(n)
	routed := map[string]string{}
	for round := range 3 {
		used := map[string]bool{}
		for i := range n {
			p := prompt(fmt.Sprintf("round %d prompt %d", round, i), 4)
			res, err := s.Schedule(ctx, schedulingtest.Completion(fmt.Sprint(round, "-", i), "m", p), eps)
			if err != nil {
				t.Fatal(err)
			}
			name := res.Target().Endpoint.Name
			if used[name] {
				t.Errorf("round %d: prompt %d went to %s again", round, i, name)
			}
			used[name] = true
			// Cold: the chosen endpoint had score 1, the scores are a ranking.
			for j := range eps {
				if eps[j].Name == name && res.Primary.Score(0, j) != 1 {
					t.Errorf("round %d prompt %d: chosen %s scored %v", round, i, name, res.Primary.Score(0, j))
				}
			}
			if want := fmt.Sprintf("pod-%d", i); name != want {
				t.Errorf("round %d prompt %d: routed to %s, want %s (round robin)", round, i, name, want)
			}
			routed[p] = name
			res.Release()
		}
	}
	// Repeating a routed prompt is warm: 0.5 everywhere.
	for p := range routed {
		res, err := s.Schedule(ctx, schedulingtest.Completion("again", "m", p), eps)
		if err != nil {
			t.Fatal(err)
		}
		for j := range eps {
			if got := res.Primary.Score(0, j); got != 0.5 {
				t.Errorf("repeated prompt: score of %s = %v, want 0.5", eps[j].Name, got)
			}
		}
		res.Release()
	}
	// Warm requests did not disturb the LRU: the next cold one goes to pod-0.
	res, err := s.Schedule(ctx, schedulingtest.Completion("new", "m", prompt("brand new", 4)), eps)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Target().Endpoint.Name; got != "pod-0" {
		t.Errorf("next cold request went to %s, want pod-0", got)
	}
	res.Release()
}

func TestEndpointRemovedForgetsIt(t *testing.T) {
	_, s := setup(t, "")
	eps := schedulingtest.Endpoints(3)
	s.Touch("pod-0", tick())
	s.Touch("pod-1", tick())
	s.EndpointRemoved("pod-0")
	// pod-0 is untracked again: order pod-0, pod-2 (untracked), pod-1.
	if got := cold(s, eps); !approxEqual(got, []float64{1, 0, 0.5}) {
		t.Errorf("after removing pod-0: scores = %v, want [1 0 0.5]", got)
	}
}

var ticks atomic.Int64

// tick returns a stamp newer than every earlier one.
func tick() scheduling.Stamp {
	n := ticks.Add(1)
	return scheduling.Stamp{Nanos: n, ID: uint64(n)}
}

// Replicas that apply the same cold-request effects in different orders,
// some twice, rank the endpoints alike.
func TestRankingIsOrderIndependent(t *testing.T) {
	h := schedulingtest.NewHandle()
	prefixPlugin := schedulingtest.New[scheduling.Plugin](t, h, "prefix-cache-scorer", "prefix-cache-scorer", "")
	h.Declare(prefixPlugin)
	a := schedulingtest.New[*nohitlru.Scorer](t, h, nohitlru.Type, "lru", `{"lruSize": 5}`)
	b := schedulingtest.New[*nohitlru.Scorer](t, h, nohitlru.Type, "lru", `{"lruSize": 5}`)
	rng := rand.New(rand.NewPCG(7, 8))
	type touch struct {
		ep string
		st scheduling.Stamp
	}
	var touches []touch
	for i := range 200 {
		touches = append(touches, touch{fmt.Sprint("pod-", rng.IntN(9)), scheduling.Stamp{Nanos: int64(rng.IntN(40)), ID: uint64(i + 1)}})
	}
	for _, x := range touches {
		a.Touch(x.ep, x.st)
	}
	rng.Shuffle(len(touches), func(i, j int) { touches[i], touches[j] = touches[j], touches[i] })
	for _, x := range append(touches, touches[:50]...) {
		b.Touch(x.ep, x.st)
	}
	names := []string{"pod-0", "pod-1", "pod-2", "pod-3", "pod-4", "pod-5", "pod-6", "pod-7", "pod-8"}
	ra, rb := a.ColdRanks(names), b.ColdRanks(names)
	if !maps.Equal(ra, rb) {
		t.Errorf("ranks differ:\n%v\n%v", ra, rb)
	}
}

// prefixMatchInfoProducerName (v0.9+) names the producer whose match is
// read, without a warning; a plugin that produces none is an error.
func TestReadsTheNamedProducer(t *testing.T) {
	s := schedulingtest.Scheduler(t, `
plugins:
- {type: approx-prefix-cache-producer, name: shared}
- {type: no-hit-lru-scorer, parameters: {prefixMatchInfoProducerName: shared}}
- {type: max-score-picker}
`)
	if w := s.Describe().Warnings; len(w) > 0 {
		t.Errorf("warnings: %q", w)
	}
	cfg, err := scheduling.ParseConfig([]byte("plugins: [{type: max-score-picker}, {type: no-hit-lru-scorer, parameters: {prefixMatchInfoProducerName: max-score-picker}}]"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := scheduling.New(cfg); err == nil || !strings.Contains(err.Error(), "produces no prefix match") {
		t.Errorf("error %v", err)
	}
}
