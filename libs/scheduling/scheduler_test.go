package scheduling_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/libs/scheduling/schedulingtest"
	"github.com/hermod/hermod/libs/telemetry"
)

var ctx = context.Background()

// total(e) = sum over scorers of weight x clamp(score(e), 0, 1); it is not
// divided by the sum of the weights, and a missing score contributes 0.
func TestCycleWeightedSumOfClampedScores(t *testing.T) {
	s := schedulingtest.Scheduler(t, `
plugins:
- type: test-fixed-scorer
  name: a
  parameters: {scores: {pod-0: 1.5, pod-1: 0.5, pod-2: -0.3, pod-3: 0.25}}
- type: test-fixed-scorer
  name: b
  parameters: {scores: {pod-0: 0.1, pod-1: 0.9, pod-3: 0.2}, nan: [pod-2]}
- type: max-score-picker
  parameters: {maxNumOfEndpoints: 4}
schedulingProfiles:
- name: default
  plugins:
  - {pluginRef: a, weight: 2}
  - {pluginRef: b, weight: 3}
  - {pluginRef: max-score-picker}
`)
	eps := schedulingtest.Endpoints(4)
	res, err := s.Schedule(ctx, schedulingtest.Completion("r1", "m", "hi"), eps)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Release()
	pr := res.Primary
	wantA := []float64{1, 0.5, 0, 0.25}
	wantB := []float64{0.1, 0.9, 0, 0.2}
	wantTotal := []float64{2*1 + 3*0.1, 2*0.5 + 3*0.9, 0, 2*0.25 + 3*0.2}
	for i := range eps {
		if got := pr.Score(0, i); got != wantA[i] {
			t.Errorf("scorer a, pod-%d = %v, want %v", i, got, wantA[i])
		}
		if got := pr.Score(1, i); got != wantB[i] {
			t.Errorf("scorer b, pod-%d = %v, want %v", i, got, wantB[i])
		}
		if math.Abs(pr.Totals[i]-wantTotal[i]) > 1e-12 {
			t.Errorf("total pod-%d = %v, want %v", i, pr.Totals[i], wantTotal[i])
		}
	}
	var order []string
	for _, tg := range pr.Targets {
		order = append(order, tg.Endpoint.Name)
	}
	if got := strings.Join(order, ","); got != "pod-1,pod-0,pod-3,pod-2" {
		t.Errorf("targets = %s", got)
	}
	if res.Target().Endpoint.Name != "pod-1" || res.Target().HostPort() != "10.0.0.2:8000" {
		t.Errorf("primary target = %+v", res.Target())
	}
	if info := pr.Scorers(); len(info) != 2 || info[0] != (scheduling.ScorerInfo{Name: "a", Type: "test-fixed-scorer", Weight: 2}) {
		t.Errorf("scorers = %+v", info)
	}
}

func TestCycleFiltersRunInOrder(t *testing.T) {
	s := schedulingtest.Scheduler(t, `
plugins:
- type: test-keep-filter
  name: first
  parameters: {keep: [pod-1, pod-2, pod-3, pod-5]}
- type: test-keep-filter
  name: second
  parameters: {keep: [pod-2, pod-3, pod-4, pod-5], mustNotSee: [pod-0, pod-4]}
- type: test-keep-filter
  name: third
  parameters: {keep: [pod-3, pod-5], mustNotSee: [pod-1]}
- type: queue-scorer
`)
	res, err := s.Schedule(ctx, schedulingtest.Completion("r", "m", "x"), schedulingtest.Waiting(0, 0, 0, 3, 0, 1))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Release()
	if got := strings.Join(schedulingtest.Names(res.Primary.Endpoints), ","); got != "pod-3,pod-5" {
		t.Errorf("endpoints after filters = %s", got)
	}
	if got := res.Target().Endpoint.Name; got != "pod-5" {
		t.Errorf("target = %s, want pod-5 (shorter queue)", got)
	}
}

func TestCycleErrorKinds(t *testing.T) {
	s := schedulingtest.Scheduler(t, `
plugins:
- {type: by-label, parameters: {label: zone, validValues: [a]}}
- {type: queue-scorer}
`)
	req := schedulingtest.Completion("r", "m", "x")

	_, err := s.Schedule(ctx, req, nil)
	if !errors.Is(err, scheduling.ErrNoCandidates) || scheduling.HTTPStatus(err) != http.StatusServiceUnavailable {
		t.Errorf("no candidates: %v (status %d)", err, scheduling.HTTPStatus(err))
	}
	_, err = s.Schedule(ctx, req, schedulingtest.Endpoints(3))
	if !errors.Is(err, scheduling.ErrNoMatch) || scheduling.HTTPStatus(err) != http.StatusServiceUnavailable {
		t.Errorf("all filtered: %v (status %d)", err, scheduling.HTTPStatus(err))
	}
	if !strings.Contains(err.Error(), `profile "default": no endpoint matched: filter by-label left none of the 3 ready endpoints`) {
		t.Errorf("message = %q", err)
	}
	if errors.Is(err, scheduling.ErrNoCandidates) || errors.Is(err, scheduling.ErrShed) {
		t.Error("a no-match error matches ErrNoCandidates or ErrShed")
	}
	bad := scheduling.BadRequestf("messages[0].content: must be a string")
	if !errors.Is(bad, scheduling.ErrBadRequest) || scheduling.HTTPStatus(bad) != http.StatusBadRequest {
		t.Errorf("bad request: %v", bad)
	}
	if scheduling.HTTPStatus(errors.New("x")) != http.StatusInternalServerError {
		t.Error("plain errors should map to 500")
	}
	wrapped := fmt.Errorf("pick: %w", err)
	if scheduling.HTTPStatus(wrapped) != http.StatusServiceUnavailable {
		t.Error("wrapped errors keep their status")
	}
}

// A valid config whose filters match no endpoint is not shedding: the
// cycle fails with KindNoMatch (503) naming the profile and the filter
// that removed the last candidates, and counts under kind no_match.
func TestFiltersMatchingNoEndpointAreNotShedding(t *testing.T) {
	reg := prometheus.NewRegistry()
	s := schedulingtest.Scheduler(t, `
plugins:
- {type: by-label, name: gpu-a100, parameters: {label: gpu, validValues: [a100]}}
- {type: queue-scorer}
schedulingProfiles:
- name: big
  plugins: [{pluginRef: gpu-a100}, {pluginRef: queue-scorer}]
`, scheduling.WithMetrics(scheduling.NewSchedulerMetrics(reg)))
	eps := schedulingtest.Endpoints(2)
	for _, e := range eps {
		e.Labels = map[string]string{"gpu": "h100"}
	}
	_, err := s.Schedule(ctx, schedulingtest.Completion("r", "m", "x"), eps)
	var se *scheduling.Error
	if !errors.As(err, &se) || se.Kind != scheduling.KindNoMatch || se.HTTPStatus() != http.StatusServiceUnavailable {
		t.Fatalf("every endpoint filtered out: %v (status %d), want a 503 no-match", err, scheduling.HTTPStatus(err))
	}
	if se.Profile != "big" || se.Filter != "gpu-a100" || errors.Is(err, scheduling.ErrShed) {
		t.Errorf("error %+v: want profile big, filter gpu-a100, not shed", se)
	}
	expected := `
# HELP hermod_scheduler_failures_total Scheduling cycles that chose no endpoint, by kind: no_candidates, no_match (the filters left no endpoint), shed, bad_request, internal.
# TYPE hermod_scheduler_failures_total counter
hermod_scheduler_failures_total{kind="no_match"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(expected), "hermod_scheduler_failures_total"); err != nil {
		t.Error(err)
	}
}

func TestCycleStateSharedBetweenPlugins(t *testing.T) {
	s := schedulingtest.Scheduler(t, `
plugins: [{type: test-state-writer}, {type: test-state-reader}]
`)
	for n := 1; n <= 5; n++ {
		res, err := s.Schedule(ctx, schedulingtest.Completion("r", "m", "x"), schedulingtest.Endpoints(n))
		if err != nil {
			t.Fatal(err)
		}
		if got := res.Target().Endpoint.Name; got != fmt.Sprintf("pod-%d", n-1) {
			t.Errorf("n=%d: target %s", n, got)
		}
		res.Release()
	}
}

func TestCyclePrepareDataFailureIsNotFatal(t *testing.T) {
	s := schedulingtest.Scheduler(t, "featureGates: [prepareDataPlugins]\nplugins: [{type: test-failing-prepare}, {type: queue-scorer}]")
	res, err := s.Schedule(ctx, schedulingtest.Completion("r", "m", "x"), schedulingtest.Endpoints(2))
	if err != nil {
		t.Fatalf("a failing prepare-data plugin failed the request: %v", err)
	}
	res.Release()
}

// At verbosity 4 every scorer logs "Running scorer" with its name, as
// reference/000 shows; at lower verbosity nothing per request is logged.
func TestCycleRunningScorerLog(t *testing.T) {
	const cfg = `
plugins:
- type: queue-scorer
- type: load-aware-scorer
- {type: kv-cache-utilization-scorer, name: kv}
`
	for _, v := range []int{0, 4} {
		var buf bytes.Buffer
		logger, err := telemetry.NewLogger(&buf, telemetry.FormatJSON, v)
		if err != nil {
			t.Fatal(err)
		}
		s := schedulingtest.Scheduler(t, cfg, scheduling.WithLogger(logger))
		res, err := s.Schedule(ctx, schedulingtest.Completion("req-7", "m", "x"), schedulingtest.Endpoints(2))
		if err != nil {
			t.Fatal(err)
		}
		res.Release()
		var scorers []string
		for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
			if line == "" {
				continue
			}
			var rec map[string]any
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				t.Fatalf("log line is not JSON: %q", line)
			}
			if rec["msg"] == "Running scorer" {
				scorers = append(scorers, rec["scorer"].(string))
				if rec["request_id"] != "req-7" {
					t.Errorf("log line without request id: %q", line)
				}
			}
		}
		want := ""
		if v == 4 {
			want = "queue-scorer,load-aware-scorer,kv"
		}
		if got := strings.Join(scorers, ","); got != want {
			t.Errorf("-v=%d: Running scorer lines for %q, want %q", v, got, want)
		}
	}
}

func TestCycleMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := scheduling.NewSchedulerMetrics(reg)
	s := schedulingtest.Scheduler(t, "plugins: [{type: queue-scorer}, {type: by-label, parameters: {label: x, validValues: [y]}}]", scheduling.WithMetrics(m))
	eps := schedulingtest.Endpoints(3)
	eps[1].Labels = map[string]string{"x": "y"}
	for range 3 {
		res, err := s.Schedule(ctx, schedulingtest.Completion("r", "m", "x"), eps)
		if err != nil {
			t.Fatal(err)
		}
		res.Release()
	}
	if _, err := s.Schedule(ctx, schedulingtest.Completion("r", "m", "x"), eps[:1]); err == nil {
		t.Fatal("expected no match")
	}
	if _, err := s.Schedule(ctx, schedulingtest.Completion("r", "m", "x"), nil); err == nil {
		t.Fatal("expected no candidates")
	}
	expected := `
# HELP inference_extension_scheduler_attempts_total [ALPHA] Total number of successful and failed scheduling attempts.
# TYPE inference_extension_scheduler_attempts_total counter
inference_extension_scheduler_attempts_total{namespace="",pod_name="",port="",status="failure",target_model_name="m"} 2
inference_extension_scheduler_attempts_total{namespace="",pod_name="pod-1",port="8000",status="success",target_model_name="m"} 3
# HELP hermod_scheduler_failures_total Scheduling cycles that chose no endpoint, by kind: no_candidates, no_match (the filters left no endpoint), shed, bad_request, internal.
# TYPE hermod_scheduler_failures_total counter
hermod_scheduler_failures_total{kind="no_candidates"} 1
hermod_scheduler_failures_total{kind="no_match"} 1
# HELP llm_d_epp_scheduler_attempts_total [ALPHA] Total number of successful and failed scheduling attempts.
# TYPE llm_d_epp_scheduler_attempts_total counter
llm_d_epp_scheduler_attempts_total{endpoint_name="",namespace="",port="",status="failure",target_model_name="m"} 2
llm_d_epp_scheduler_attempts_total{endpoint_name="pod-1",namespace="",port="8000",status="success",target_model_name="m"} 3
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(expected), "inference_extension_scheduler_attempts_total", "hermod_scheduler_failures_total", "llm_d_epp_scheduler_attempts_total"); err != nil {
		t.Error(err)
	}
	for _, prefix := range []string{"inference_extension_", "llm_d_epp_"} {
		if n := testutil.CollectAndCount(reg, prefix+"plugin_duration_seconds"); n < 4 {
			t.Errorf("%splugin_duration_seconds series = %d, want filter, scorer, picker and handler", prefix, n)
		}
		if n := testutil.CollectAndCount(reg, prefix+"scheduler_e2e_duration_seconds"); n != 1 {
			t.Errorf("%sscheduler_e2e_duration_seconds series = %d", prefix, n)
		}
	}
	m.RequestProcessed(3 * time.Millisecond)
	m.ResponseProcessed(time.Millisecond)
	for _, name := range []string{"llm_d_epp_request_processing_duration_seconds", "llm_d_epp_response_processing_duration_seconds"} {
		if n := testutil.CollectAndCount(reg, name); n != 1 {
			t.Errorf("%s series = %d", name, n)
		}
	}
}

// Results stay valid until released while other cycles run; run with -race.
func TestCycleConcurrentResults(t *testing.T) {
	s := schedulingtest.Scheduler(t, `
plugins:
- {type: prefix-cache-scorer}
- {type: queue-scorer}
- {type: active-request-scorer}
- {type: max-score-picker, parameters: {maxNumOfEndpoints: 2}}
`)
	eps := schedulingtest.Endpoints(16)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				id := fmt.Sprintf("g%d-%d", g, i)
				req := schedulingtest.Completion(id, "m", strings.Repeat(fmt.Sprintf("prompt %d ", i%7), 40))
				res, err := s.Schedule(ctx, req, eps)
				if err != nil {
					errs <- err
					return
				}
				if res.RequestID != id || len(res.Primary.Targets) != 2 || res.Primary.Targets[0].Endpoint == res.Primary.Targets[1].Endpoint {
					errs <- fmt.Errorf("result of %s corrupted: %s %+v", id, res.RequestID, res.Primary.Targets)
					return
				}
				resp := scheduling.NewResponse(res, http.StatusOK)
				res.Release()
				s.ResponseComplete(ctx, resp)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// A stale or repeated Release must not recycle a result someone else holds.
func TestReleaseTwiceIsHarmless(t *testing.T) {
	s := schedulingtest.Scheduler(t, "plugins: [{type: queue-scorer}]")
	eps := schedulingtest.Endpoints(3)
	a, err := s.Schedule(ctx, schedulingtest.Completion("A", "m", "x"), eps)
	if err != nil {
		t.Fatal(err)
	}
	a.Release()
	b, err := s.Schedule(ctx, schedulingtest.Completion("B", "m", "x"), eps)
	if err != nil {
		t.Fatal(err)
	}
	a.Release() // stale
	c, err := s.Schedule(ctx, schedulingtest.Completion("C", "m", "x"), eps)
	if err != nil {
		t.Fatal(err)
	}
	if b == c || b.RequestID != "B" || b.Primary == c.Primary {
		t.Fatalf("a stale Release recycled a live result: b=%s c=%s", b.RequestID, c.RequestID)
	}
	if b.DecisionID == c.DecisionID || b.DecisionID == 0 {
		t.Errorf("decision ids %d %d", b.DecisionID, c.DecisionID)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() { defer wg.Done(); c.Release() }()
	}
	wg.Wait()
	b.Release()
}

// A panicking plugin fails its request with a 500-kind error and leaves the
// scheduler usable.
func TestPluginPanicIsContained(t *testing.T) {
	s := schedulingtest.Scheduler(t, "plugins: [{type: test-panic-scorer}, {type: queue-scorer}]")
	eps := schedulingtest.Endpoints(2)
	_, err := s.Schedule(ctx, schedulingtest.Completion("r", "boom", "x"), eps)
	if err == nil || scheduling.HTTPStatus(err) != http.StatusInternalServerError || !strings.Contains(err.Error(), "scorer exploded") {
		t.Fatalf("panic became %v", err)
	}
	done := make(chan error, 1)
	go func() {
		res, err := s.Schedule(ctx, schedulingtest.Completion("r2", "fine", "x"), eps)
		if err == nil {
			res.Release()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the scheduler stayed locked after a plugin panic")
	}
}

// Filters that hand back their input (or part of it) must not make a later
// filter write over the slice it is reading.
func TestFilterReturningItsInput(t *testing.T) {
	s := schedulingtest.Scheduler(t, `
plugins:
- {type: test-keep-filter, name: f1, parameters: {keep: [pod-0, pod-1, pod-2, pod-3]}}
- {type: test-passthrough-filter, name: same}
- {type: test-keep-filter, name: f3, parameters: {keep: [pod-1, pod-3]}}
- {type: test-passthrough-filter, name: same2}
- {type: test-keep-filter, name: f5, parameters: {keep: [pod-3]}}
- {type: queue-scorer}
`)
	eps := schedulingtest.Endpoints(6)
	res, err := s.Schedule(ctx, schedulingtest.Completion("r", "m", "x"), eps)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Release()
	if got := strings.Join(schedulingtest.Names(res.Primary.Endpoints), ","); got != "pod-3" {
		t.Errorf("endpoints after filters = %s, want pod-3", got)
	}
	if got := strings.Join(schedulingtest.Names(eps), ","); got != "pod-0,pod-1,pod-2,pod-3,pod-4,pod-5" {
		t.Errorf("the caller's candidates were modified: %s", got)
	}
}

// A picker the builder adds is not a declared plugin: profiles cannot refer
// to it, whatever their order.
func TestImplicitPluginsAreNotReferenceable(t *testing.T) {
	for _, profiles := range []string{
		"[{name: a, plugins: [{pluginRef: queue-scorer}]}, {name: b, plugins: [{pluginRef: max-score-picker}]}]",
		"[{name: b, plugins: [{pluginRef: max-score-picker}]}, {name: a, plugins: [{pluginRef: queue-scorer}]}]",
	} {
		_, err := build("plugins: [{type: queue-scorer}, {type: pd-profile-handler, parameters: {decodeProfile: a, prefillProfile: b}}]\nschedulingProfiles: " + profiles)
		if err == nil || !strings.Contains(err.Error(), `no plugin named "max-score-picker" is declared`) {
			t.Errorf("%s: %v", profiles, err)
		}
	}
}

// EndpointRemoved reaches plugins with per-endpoint state: the prefix index
// forgets the endpoint.
func TestEndpointRemoved(t *testing.T) {
	s := schedulingtest.Scheduler(t, "plugins: [{type: prefix-cache-scorer, parameters: {autoTune: false}}]")
	eps := schedulingtest.Endpoints(2)
	prompt := strings.Repeat("a shared prompt prefix ", 30)
	first, err := s.Schedule(ctx, schedulingtest.Completion("r1", "m", prompt), eps)
	if err != nil {
		t.Fatal(err)
	}
	holder := first.Target().Endpoint.Name
	first.Release()
	second, err := s.Schedule(ctx, schedulingtest.Completion("r2", "m", prompt), eps)
	if err != nil {
		t.Fatal(err)
	}
	if second.Target().Endpoint.Name != holder {
		t.Fatalf("prefix not remembered")
	}
	second.Release()
	s.EndpointRemoved(holder)
	third, err := s.Schedule(ctx, schedulingtest.Completion("r3", "m", prompt), eps)
	if err != nil {
		t.Fatal(err)
	}
	defer third.Release()
	for i := range eps {
		if third.Primary.Score(0, i) != 0 {
			t.Errorf("%s still scores %v after %s was removed", eps[i].Name, third.Primary.Score(0, i), holder)
		}
	}
}
