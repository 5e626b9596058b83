package activerequest_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/hermod/hermod/libs/plugins/activerequest"
	_ "github.com/hermod/hermod/libs/plugins/picker"
	_ "github.com/hermod/hermod/libs/plugins/profilehandler"
	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/libs/scheduling/schedulingtest"
)

type fakeClock = schedulingtest.Clock

func newFakeClock() *fakeClock { return schedulingtest.NewClock() }

func newScorer(t *testing.T, clock *fakeClock, params string) *activerequest.Scorer {
	t.Helper()
	h := schedulingtest.NewHandle()
	if clock != nil {
		h.Clock = clock.Now
	}
	return schedulingtest.New[*activerequest.Scorer](t, h, activerequest.Type, "", params)
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

func score(s *activerequest.Scorer, eps []*scheduling.Endpoint) []float64 {
	return schedulingtest.Score(s, schedulingtest.CycleState(1), schedulingtest.Completion("r", "m", "hello"), eps)
}

// result builds a scheduling result with the given decision id whose
// profiles target the given endpoints (one profile per target; nil = a
// profile that picked nothing).
func result(decision uint64, targets ...*scheduling.Endpoint) *scheduling.Result {
	res := &scheduling.Result{RequestID: fmt.Sprintf("req-%d", decision), DecisionID: decision}
	for i, e := range targets {
		pr := &scheduling.ProfileResult{Profile: "p" + string(rune('a'+i))}
		if e != nil {
			pr.Endpoints = []*scheduling.Endpoint{e}
			pr.Targets = []scheduling.Target{{Endpoint: e, Port: e.Port}}
		} else {
			pr.Err = errors.New("no endpoint")
		}
		res.Profiles = append(res.Profiles, pr)
	}
	if len(res.Profiles) > 0 {
		res.Primary = res.Profiles[0]
	}
	return res
}

func TestRegisteredDefaults(t *testing.T) {
	s := newScorer(t, nil, "")
	if got := s.TypedName(); got.Type != "active-request-scorer" || got.Name != "active-request-scorer" {
		t.Errorf("TypedName = %+v", got)
	}
	p, ok := s.Parameters().(activerequest.Params)
	if !ok {
		t.Fatalf("Parameters() = %T", s.Parameters())
	}
	if p.RequestTimeout.Std() != 2*time.Minute || p.IdleThreshold != 0 || p.MaxBusyScore != 1.0 {
		t.Errorf("defaults = %+v, want requestTimeout 2m, idleThreshold 0, maxBusyScore 1", p)
	}
	var _ scheduling.Scorer = s
	var _ scheduling.PreRequest = s
	var _ scheduling.ResponseComplete = s
}

func TestParams(t *testing.T) {
	s := newScorer(t, nil, `{"requestTimeout": "30s", "idleThreshold": 2, "maxBusyScore": 0.5}`)
	p := s.Parameters().(activerequest.Params)
	if p.RequestTimeout.Std() != 30*time.Second || p.IdleThreshold != 2 || p.MaxBusyScore != 0.5 {
		t.Errorf("params = %+v", p)
	}
	for _, ok := range []string{`{"maxBusyScore": 0}`, `{"maxBusyScore": 1}`, `{"idleThreshold": 0}`, `{"requestTimeout": "500ms"}`} {
		if _, err := schedulingtest.NewErr(schedulingtest.NewHandle(), activerequest.Type, "", ok); err != nil {
			t.Errorf("%s: unexpected error %v", ok, err)
		}
	}
}

func TestParamErrors(t *testing.T) {
	cases := []struct {
		params string
		path   string
		words  []string
	}{
		{`{"requestTimeout": "abc"}`, "parameters.requestTimeout", []string{"duration"}},
		{`{"requestTimeout": 5}`, "parameters.requestTimeout", []string{"duration"}},
		{`{"requestTimeout": "0s"}`, "parameters.requestTimeout", nil},
		{`{"requestTimeout": "-1m"}`, "parameters.requestTimeout", nil},
		{`{"idleThreshold": -1}`, "parameters.idleThreshold", nil},
		{`{"idleThreshold": "x"}`, "parameters.idleThreshold", nil},
		{`{"maxBusyScore": 1.5}`, "parameters.maxBusyScore", nil},
		{`{"maxBusyScore": -0.1}`, "parameters.maxBusyScore", nil},
	}
	for _, c := range cases {
		_, err := schedulingtest.NewErr(schedulingtest.NewHandle(), activerequest.Type, "", c.params)
		if err == nil {
			t.Errorf("%s: no error", c.params)
			continue
		}
		var pe *scheduling.ParamError
		if !errors.As(err, &pe) || pe.Path != c.path {
			t.Errorf("%s: error %q (%T) does not name %s", c.params, err, err, c.path)
		}
		for _, w := range c.words {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not mention %q", c.params, err, w)
			}
		}
	}
}

func TestScoreNoRequests(t *testing.T) {
	s := newScorer(t, newFakeClock(), "")
	eps := schedulingtest.Endpoints(3)
	if got := score(s, eps); !approxEqual(got, []float64{1, 1, 1}) {
		t.Errorf("idle scores = %v, want all 1", got)
	}
}

func TestScoreFormula(t *testing.T) {
	eps := schedulingtest.Endpoints(4)
	load := func(s *activerequest.Scorer, counts ...int) {
		n := 0
		for i, c := range counts {
			for range c {
				n++
				s.Tracker().Start(uint64(n), []string{eps[i].Name})
			}
		}
	}
	cases := []struct {
		params string
		counts []int
		want   []float64
	}{
		// m = 4: (4-c)/4.
		{"", []int{0, 1, 2, 4}, []float64{1, 0.75, 0.5, 0}},
		{"", []int{3, 3, 3, 3}, []float64{0, 0, 0, 0}},
		{"", []int{0, 0, 0, 1}, []float64{1, 1, 1, 0}},
		{`{"maxBusyScore": 0.8}`, []int{0, 1, 2, 4}, []float64{1, 0.6, 0.4, 0}},
		{`{"maxBusyScore": 0}`, []int{0, 1, 2, 4}, []float64{1, 0, 0, 0}},
		// c <= idleThreshold -> 1.0 regardless of m.
		{`{"idleThreshold": 2}`, []int{0, 1, 2, 4}, []float64{1, 1, 1, 0}},
		{`{"idleThreshold": 1}`, []int{1, 2, 3, 8}, []float64{1, 0.75, 0.625, 0}},
		{`{"idleThreshold": 1, "maxBusyScore": 0.5}`, []int{1, 2, 3, 8}, []float64{1, 0.375, 0.3125, 0}},
		{`{"idleThreshold": 10}`, []int{1, 2, 3, 8}, []float64{1, 1, 1, 1}},
	}
	for _, c := range cases {
		s := newScorer(t, newFakeClock(), c.params)
		load(s, c.counts...)
		if got := score(s, eps); !approxEqual(got, c.want) {
			t.Errorf("params %s counts %v: scores %v, want %v", c.params, c.counts, got, c.want)
		}
	}
}

// m is the maximum over the candidates only: a busier endpoint outside the
// candidate set does not change the scale.
func TestScoreMaxOverCandidatesOnly(t *testing.T) {
	s := newScorer(t, newFakeClock(), "")
	all := schedulingtest.Endpoints(4)
	tr := s.Tracker()
	tr.Start(1, []string{"pod-1"})
	tr.Start(2, []string{"pod-2"})
	tr.Start(3, []string{"pod-2"})
	for i := range 10 {
		tr.Start(uint64(100+i), []string{"pod-3"})
	}
	if got := score(s, all[:3]); !approxEqual(got, []float64{1, 0.5, 0}) {
		t.Errorf("scores over pod-0..2 = %v, want [1 0.5 0]", got)
	}
	if got := score(s, all); !approxEqual(got, []float64{1, 0.9, 0.8, 0}) {
		t.Errorf("scores over pod-0..3 = %v, want [1 0.9 0.8 0]", got)
	}
	// Only busy endpoints among the candidates, all equally busy.
	if got := score(s, all[2:3]); !approxEqual(got, []float64{0}) {
		t.Errorf("single busy candidate = %v, want [0]", got)
	}
}

func TestPreRequestAndResponseComplete(t *testing.T) {
	s := newScorer(t, newFakeClock(), "")
	eps := schedulingtest.Endpoints(4)
	ctx := context.Background()
	tr := s.Tracker()

	// decode -> pod-1, prefill -> pod-2, a third profile failed.
	res := result(1, eps[1], eps[2], nil)
	// A fallback target of the primary profile is not counted.
	res.Primary.Targets = append(res.Primary.Targets, scheduling.Target{Endpoint: eps[3], Port: 8000})
	res.Prefill = res.Profiles[1]
	schedulingtest.PreRequest(ctx, s, schedulingtest.CycleState(1), schedulingtest.Completion("req-1", "m", "p"), res)
	for i, want := range []int{0, 1, 1, 0} {
		if got := tr.InFlight(eps[i].Name); got != want {
			t.Errorf("after PreRequest: InFlight(%s) = %d, want %d", eps[i].Name, got, want)
		}
	}
	if got := score(s, eps); !approxEqual(got, []float64{1, 0, 0, 1}) {
		t.Errorf("scores = %v, want [1 0 0 1]", got)
	}

	// A profile that has targets but an error is not counted.
	res2 := result(2, eps[0], eps[3])
	res2.Profiles[1].Err = errors.New("failed")
	schedulingtest.PreRequest(ctx, s, schedulingtest.CycleState(1), schedulingtest.Completion("req-2", "m", "p"), res2)
	if tr.InFlight("pod-0") != 1 || tr.InFlight("pod-3") != 0 {
		t.Errorf("req-2: pod-0 %d pod-3 %d, want 1 and 0", tr.InFlight("pod-0"), tr.InFlight("pod-3"))
	}

	// Completion is matched by the response's decision id.
	s.ResponseComplete(ctx, &scheduling.Response{RequestID: "other", DecisionID: 1})
	for i, want := range []int{1, 0, 0, 0} {
		if got := tr.InFlight(eps[i].Name); got != want {
			t.Errorf("after completing req-1: InFlight(%s) = %d, want %d", eps[i].Name, got, want)
		}
	}
	// A redelivered completion changes nothing.
	s.ResponseComplete(ctx, &scheduling.Response{DecisionID: 1})
	s.ResponseComplete(ctx, &scheduling.Response{DecisionID: 999})
	if tr.InFlight("pod-0") != 1 || tr.Len() != 1 {
		t.Errorf("after redelivery: pod-0 %d len %d, want 1 and 1", tr.InFlight("pod-0"), tr.Len())
	}
	s.ResponseComplete(ctx, scheduling.NewResponse(res2, 200))
	if tr.Len() != 0 || tr.InFlight("pod-0") != 0 {
		t.Errorf("after completing req-2: len %d pod-0 %d", tr.Len(), tr.InFlight("pod-0"))
	}
}

func TestRequestTimeout(t *testing.T) {
	clock := newFakeClock()
	s := newScorer(t, clock, `{"requestTimeout": "1m"}`)
	eps := schedulingtest.Endpoints(2)
	ctx := context.Background()
	schedulingtest.PreRequest(ctx, s, schedulingtest.CycleState(1), schedulingtest.Completion("old", "m", "p"), result(3, eps[0]))
	clock.Advance(30 * time.Second)
	schedulingtest.PreRequest(ctx, s, schedulingtest.CycleState(1), schedulingtest.Completion("new", "m", "p"), result(4, eps[1]))
	clock.Advance(29 * time.Second)
	if got := score(s, eps); !approxEqual(got, []float64{0, 0}) {
		t.Errorf("at 59s: scores %v, want [0 0]", got)
	}
	clock.Advance(2 * time.Second) // old is 61s old, new 31s
	if got := score(s, eps); !approxEqual(got, []float64{1, 0}) {
		t.Errorf("at 61s: scores %v, want [1 0]", got)
	}
	clock.Advance(30 * time.Second)
	if got := score(s, eps); !approxEqual(got, []float64{1, 1}) {
		t.Errorf("at 91s: scores %v, want [1 1]", got)
	}
	if s.Tracker().Len() != 0 {
		t.Errorf("Len = %d after every request timed out", s.Tracker().Len())
	}
	// A late completion of an expired request is ignored.
	schedulingtest.PreRequest(ctx, s, schedulingtest.CycleState(1), schedulingtest.Completion("x", "m", "p"), result(5, eps[0]))
	s.ResponseComplete(ctx, &scheduling.Response{DecisionID: 3})
	if got := s.Tracker().InFlight("pod-0"); got != 1 {
		t.Errorf("late completion of an expired request changed pod-0 to %d", got)
	}
}

// The whole scheduler sees each decision before the next one: a burst of
// requests spreads over idle endpoints, and completions free endpoints.
func TestSchedulerSpreadsInFlight(t *testing.T) {
	clock := newFakeClock()
	s := schedulingtest.Scheduler(t, `
apiVersion: inference.networking.x-k8s.io/v1alpha1
kind: EndpointPickerConfig
plugins:
- type: active-request-scorer
  parameters:
    requestTimeout: "1m"
- type: max-score-picker
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: active-request-scorer
  - pluginRef: max-score-picker
`, scheduling.WithClock(clock.Now))
	eps := schedulingtest.Endpoints(4)
	ctx := context.Background()
	seen := map[string]string{}
	reqs := map[string]*scheduling.Request{}
	decisions := map[string]uint64{}
	for i := range 4 {
		id := "req-" + string(rune('a'+i))
		req := schedulingtest.Completion(id, "m", "hello")
		res, err := s.Schedule(ctx, req, eps)
		if err != nil {
			t.Fatal(err)
		}
		name := res.Target().Endpoint.Name
		if prev, dup := seen[name]; dup {
			t.Errorf("%s and %s both went to %s", prev, id, name)
		}
		seen[name] = id
		reqs[name] = req
		decisions[name] = res.DecisionID
		res.Release()
	}
	// Complete the request on pod-2: it is the only idle endpoint.
	s.ResponseComplete(ctx, &scheduling.Response{RequestID: seen["pod-2"], DecisionID: decisions["pod-2"]})
	res, err := s.Schedule(ctx, schedulingtest.Completion("req-e", "m", "hello"), eps)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Target().Endpoint.Name; got != "pod-2" {
		t.Errorf("after completion on pod-2, picked %s", got)
	}
	if got := res.Primary.Score(0, 2); got != 1 {
		t.Errorf("pod-2 score %v, want 1", got)
	}
	res.Release()
	// Past the timeout everything is idle again.
	clock.Advance(2 * time.Minute)
	res, err = s.Schedule(ctx, schedulingtest.Completion("req-f", "m", "hello"), eps)
	if err != nil {
		t.Fatal(err)
	}
	for i := range eps {
		if got := res.Primary.Score(0, i); got != 1 {
			t.Errorf("after timeout: score of %s = %v, want 1", eps[i].Name, got)
		}
	}
	res.Release()
}

// Client request ids need not be unique: requests sharing one are still
// counted one by one (the tracker keys by decision id).
func TestDuplicateClientRequestIDs(t *testing.T) {
	s := schedulingtest.Scheduler(t, "plugins: [{type: active-request-scorer}]")
	eps := schedulingtest.Endpoints(3)
	ctx := context.Background()
	var results []*scheduling.Result
	got := map[string]bool{}
	for range 3 {
		res, err := s.Schedule(ctx, schedulingtest.Completion("same-id", "m", "p"), eps)
		if err != nil {
			t.Fatal(err)
		}
		got[res.Target().Endpoint.Name] = true
		results = append(results, res)
	}
	if len(got) != 3 {
		t.Errorf("three requests with one client id went to %v, want three endpoints", got)
	}
	for _, res := range results {
		s.ResponseComplete(ctx, scheduling.NewResponse(res, 200))
		res.Release()
	}
	for _, e := range eps {
		res, err := s.Schedule(ctx, schedulingtest.Completion("same-id", "m", "p"), []*scheduling.Endpoint{e})
		if err != nil {
			t.Fatal(err)
		}
		if res.Primary.Score(0, 0) != 1 {
			t.Errorf("%s still counted after its request completed", e.Name)
		}
		res.Release()
	}
}
