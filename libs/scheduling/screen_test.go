package scheduling_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/libs/scheduling/schedulingtest"
)

func init() {
	scheduling.Register(scheduling.Registration{Type: "test-keep-screener", New: func(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
		var p struct {
			Keep []string `json:"keep"`
		}
		if err := scheduling.DecodeParameters(raw, &p, h); err != nil {
			return nil, err
		}
		return &keepScreener{Named: scheduling.Named{Type: "test-keep-screener", Name: name}, keep: p.Keep}, nil
	}})
	scheduling.Register(scheduling.Registration{Type: "test-panic-screener", New: func(name string, _ json.RawMessage, _ scheduling.Handle) (scheduling.Plugin, error) {
		return &panicScreener{scheduling.Named{Type: "test-panic-screener", Name: name}}, nil
	}})
	scheduling.Register(scheduling.Registration{Type: "test-candidates-recorder", New: func(name string, _ json.RawMessage, _ scheduling.Handle) (scheduling.Plugin, error) {
		return &candidatesRecorder{Named: scheduling.Named{Type: "test-candidates-recorder", Name: name}}, nil
	}})
	scheduling.Register(scheduling.Registration{Type: "test-served-verifier", New: func(name string, _ json.RawMessage, _ scheduling.Handle) (scheduling.Plugin, error) {
		return &servedVerifier{scheduling.Named{Type: "test-served-verifier", Name: name}}, nil
	}})
}

// keepScreener keeps the endpoints it lists and records what it was given.
type keepScreener struct {
	scheduling.Named
	keep []string
	mu   sync.Mutex
	seen [][]string
}

func (s *keepScreener) Screen(_ context.Context, _ *scheduling.Request, in, dst []*scheduling.Endpoint) []*scheduling.Endpoint {
	s.mu.Lock()
	s.seen = append(s.seen, schedulingtest.Names(in))
	s.mu.Unlock()
	for _, e := range in {
		if slices.Contains(s.keep, e.Name) {
			dst = append(dst, e)
		}
	}
	return dst
}

type panicScreener struct{ scheduling.Named }

func (panicScreener) Screen(context.Context, *scheduling.Request, []*scheduling.Endpoint, []*scheduling.Endpoint) []*scheduling.Endpoint {
	panic("screener exploded")
}

// candidatesRecorder records the candidates its cycle preparer and its
// admitter see.
type candidatesRecorder struct {
	scheduling.Named
	prepared, admitted []string
}

func (r *candidatesRecorder) PrepareCycle(_ context.Context, _ *scheduling.CycleState, _ *scheduling.Request, candidates []*scheduling.Endpoint) {
	r.prepared = schedulingtest.Names(candidates)
}

func (r *candidatesRecorder) Admit(_ context.Context, _ *scheduling.CycleState, _ *scheduling.Request, candidates []*scheduling.Endpoint) error {
	r.admitted = schedulingtest.Names(candidates)
	return nil
}

// servedVerifier stamps what it was told.
type servedVerifier struct{ scheduling.Named }

func (v servedVerifier) VerifyServed(_ context.Context, resp *scheduling.ServedResponse) {
	resp.SetHeader("x-"+v.Name, resp.RequestID+" "+strings.Join(resp.Chosen, ","))
}

func pluginNamed[T scheduling.Plugin](t *testing.T, s *scheduling.Scheduler, name string) T {
	t.Helper()
	for _, p := range s.Plugins() {
		if p.TypedName().Name == name {
			if v, ok := p.(T); ok {
				return v
			}
		}
	}
	t.Fatalf("no plugin %q of type %T", name, *new(T))
	panic("unreachable")
}

// Every screener is given the request's candidates, and the cycle
// preparers, the admitters and every profile see only those all of them
// keep, in candidate order.
func TestScreenersNarrowTheCandidatesOfEverything(t *testing.T) {
	s := schedulingtest.Scheduler(t, `
plugins:
- {type: test-keep-screener, name: a, parameters: {keep: [pod-0, pod-1, pod-2]}}
- {type: test-keep-screener, name: b, parameters: {keep: [pod-1, pod-2, pod-3]}}
- {type: test-candidates-recorder, name: rec}
- {type: test-keep-filter, name: f, parameters: {keep: [pod-0, pod-1, pod-2, pod-3], mustNotSee: [pod-0, pod-3]}}
- {type: test-fixed-scorer, name: sc, parameters: {scores: {pod-1: 0.2, pod-2: 0.9, pod-3: 1}}}
schedulingProfiles:
- name: default
  plugins: [{pluginRef: f}, {pluginRef: sc}]
`)
	eps := schedulingtest.Endpoints(4)
	res, err := s.Schedule(ctx, schedulingtest.Completion("r1", "m", "hi"), eps)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Release()
	if got := res.Target().Endpoint.Name; got != "pod-2" {
		t.Errorf("routed to %s, want pod-2 (pod-3 scores higher but is screened out)", got)
	}
	for _, name := range []string{"a", "b"} {
		if seen := pluginNamed[*keepScreener](t, s, name).seen; len(seen) != 1 || strings.Join(seen[0], ",") != "pod-0,pod-1,pod-2,pod-3" {
			t.Errorf("screener %s was given %v, want every candidate", name, seen)
		}
	}
	rec := pluginNamed[*candidatesRecorder](t, s, "rec")
	if got := strings.Join(rec.prepared, ","); got != "pod-1,pod-2" {
		t.Errorf("the cycle preparer saw %s, want pod-1,pod-2", got)
	}
	if got := strings.Join(rec.admitted, ","); got != "pod-1,pod-2" {
		t.Errorf("the admitter saw %s, want pod-1,pod-2", got)
	}
	if got := scheduling.ExtensionPoints(pluginNamed[*keepScreener](t, s, "a")); !slices.Contains(got, scheduling.PointScreener) {
		t.Errorf("extension points %v", got)
	}
}

// A screener that leaves nothing fails the request with a no-match error
// (503) naming it; a panicking one fails it with an internal error.
func TestScreenerLeavingNothingFails(t *testing.T) {
	s := schedulingtest.Scheduler(t, `
plugins:
- {type: test-keep-screener, name: a, parameters: {keep: [pod-0]}}
- {type: test-keep-screener, name: revisions, parameters: {keep: [pod-1]}}
`)
	_, err := s.Schedule(ctx, schedulingtest.Completion("r1", "m", "hi"), schedulingtest.Endpoints(3))
	var se *scheduling.Error
	if !errors.As(err, &se) || se.Kind != scheduling.KindNoMatch || se.HTTPStatus() != http.StatusServiceUnavailable || se.Filter != "revisions" ||
		!strings.Contains(err.Error(), "screener revisions (test-keep-screener) left none of the 3") {
		t.Errorf("error %v (%+v)", err, se)
	}

	p := schedulingtest.Scheduler(t, "plugins: [{type: test-panic-screener}]")
	if _, err := p.Schedule(ctx, schedulingtest.Completion("r2", "m", "hi"), schedulingtest.Endpoints(2)); !errors.As(err, &se) || se.Kind != scheduling.KindInternal {
		t.Errorf("panicking screener: %v", err)
	}
}

// VerifyServed runs every served verifier on the response, and
// VerifiesServed says whether there is one.
func TestVerifyServedRunsTheVerifiers(t *testing.T) {
	s := schedulingtest.Scheduler(t, "plugins: [{type: test-served-verifier, name: one}, {type: test-served-verifier, name: two}, {type: queue-scorer}]")
	if !s.VerifiesServed() {
		t.Fatal("VerifiesServed false")
	}
	resp := &scheduling.ServedResponse{RequestID: "r1", Chosen: []string{"10.0.0.1:8000", "10.0.0.2:8000"}}
	s.VerifyServed(ctx, resp)
	if resp.Headers["x-one"] != "r1 10.0.0.1:8000,10.0.0.2:8000" || resp.Headers["x-two"] == "" {
		t.Errorf("headers %v", resp.Headers)
	}
	if schedulingtest.Scheduler(t, "plugins: [{type: queue-scorer}]").VerifiesServed() {
		t.Error("VerifiesServed true without a verifier")
	}
}
