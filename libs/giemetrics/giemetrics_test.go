package giemetrics

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/protobuf/types/known/durationpb"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
)

// A request's life through the objective family: counted and sized when
// it starts, running until it finishes, then its latency, size, tokens and
// per-token time; errors by code.
func TestObjectiveFamily(t *testing.T) {
	reg := prometheus.NewRegistry()
	o := NewObjective(reg)
	shed := Labels{Model: "llama", Priority: -1, FairnessID: "team-a"}
	plain := Labels{Model: "llama"}
	o.Started(shed, 300)
	if got := testutil.ToFloat64(o.running.WithLabelValues("llama")); got != 1 {
		t.Fatalf("running %v after a start", got)
	}
	o.Finished(shed, &eventsv1.RequestCompleted{Model: "llama", Outcome: eventsv1.CompletionOutcome_COMPLETION_OUTCOME_SUCCESS, StatusCode: 200,
		PromptTokens: 100, CachedTokens: 64, CompletionTokens: 10, Duration: durationpb.New(2 * time.Second), Streamed: true,
		Ttft: durationpb.New(200 * time.Millisecond), Tpot: durationpb.New(20 * time.Millisecond)}, 1500)
	o.Started(plain, 40)
	o.Finished(plain, &eventsv1.RequestCompleted{Model: "llama", Outcome: eventsv1.CompletionOutcome_COMPLETION_OUTCOME_UPSTREAM_ERROR, StatusCode: 500}, 50)
	o.Refused(plain, ErrorCode(429, false))
	want := `
# HELP inference_objective_request_total [ALPHA] Counter of inference objective requests broken out for each model and target model.
# TYPE inference_objective_request_total counter
inference_objective_request_total{model_name="llama",priority="-1",target_model_name="llama"} 1
inference_objective_request_total{model_name="llama",priority="0",target_model_name="llama"} 1
# HELP inference_objective_request_error_total [ALPHA] Counter of inference objective requests errors broken out for each model and target model.
# TYPE inference_objective_request_error_total counter
inference_objective_request_error_total{error_code="ModelServerError",model_name="llama",target_model_name="llama"} 1
inference_objective_request_error_total{error_code="ResourceExhausted",model_name="llama",target_model_name="llama"} 1
# HELP inference_objective_running_requests [ALPHA] Inference objective number of running requests in each model.
# TYPE inference_objective_running_requests gauge
inference_objective_running_requests{model_name="llama"} 0
# HELP llm_d_epp_request_total [ALPHA] Counter of requests broken out by model, target model, fairness id and priority.
# TYPE llm_d_epp_request_total counter
llm_d_epp_request_total{fairness_id="",model_name="llama",priority="0",target_model_name="llama"} 1
llm_d_epp_request_total{fairness_id="team-a",model_name="llama",priority="-1",target_model_name="llama"} 1
# HELP llm_d_epp_request_error_total [ALPHA] Counter of request errors broken out by model, target model, fairness id, priority and error code.
# TYPE llm_d_epp_request_error_total counter
llm_d_epp_request_error_total{error_code="ModelServerError",fairness_id="",model_name="llama",priority="0",target_model_name="llama"} 1
llm_d_epp_request_error_total{error_code="ResourceExhausted",fairness_id="",model_name="llama",priority="0",target_model_name="llama"} 1
# HELP llm_d_epp_request_running [ALPHA] Number of requests running.
# TYPE llm_d_epp_request_running gauge
llm_d_epp_request_running{fairness_id="",model_name="llama",priority="0",target_model_name="llama"} 0
llm_d_epp_request_running{fairness_id="team-a",model_name="llama",priority="-1",target_model_name="llama"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "inference_objective_request_total", "inference_objective_request_error_total", "inference_objective_running_requests",
		"llm_d_epp_request_total", "llm_d_epp_request_error_total", "llm_d_epp_request_running"); err != nil {
		t.Error(err)
	}
	for name, wantCount := range map[string]uint64{
		"inference_objective_request_duration_seconds": 1, "inference_objective_request_sizes": 2, "inference_objective_response_sizes": 2,
		"inference_objective_input_tokens": 1, "inference_objective_output_tokens": 1, "inference_objective_prompt_cached_tokens": 1,
		"inference_objective_normalized_time_per_output_token_seconds": 1, "inference_objective_request_ttft_seconds": 1,
		"inference_objective_request_tpot_seconds": 1,
		"llm_d_epp_request_duration_seconds":       1, "llm_d_epp_request_size_bytes": 2, "llm_d_epp_response_size_bytes": 2,
		"llm_d_epp_request_input_tokens": 1, "llm_d_epp_request_output_tokens": 1, "llm_d_epp_request_cached_tokens": 1,
		"llm_d_epp_request_ntpot_seconds": 1, "llm_d_epp_request_ttft_seconds": 1, "llm_d_epp_request_streaming_tpot_seconds": 1,
	} {
		if got := histogramCount(t, reg, name); got != wantCount {
			t.Errorf("%s: %d observations, want %d", name, got, wantCount)
		}
	}
}

func histogramCount(t *testing.T, reg *prometheus.Registry, name string) uint64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				n += m.GetHistogram().GetSampleCount()
			}
		}
	}
	return n
}

func TestErrorCodes(t *testing.T) {
	for status, want := range map[int]string{400: ErrorBadRequest, 413: ErrorBadRequest, 401: ErrorUnauthorized, 403: ErrorForbidden,
		404: ErrorNotFound, 429: ErrorResourceExhausted, 503: ErrorServiceUnavailable, 504: ErrorServiceUnavailable, 500: ErrorInternal, 502: ErrorInternal} {
		if got := ErrorCode(status, false); got != want {
			t.Errorf("ErrorCode(%d) = %s, want %s", status, got, want)
		}
	}
	if ErrorCode(400, true) != ErrorModelServer {
		t.Error("a model server's error is not ModelServerError")
	}
}

func TestInfo(t *testing.T) {
	reg := prometheus.NewRegistry()
	if err := RegisterInfo(reg); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(reg, "inference_extension_info"); n != 1 {
		t.Fatalf("%d info series", n)
	}
}

// Model names and fairness ids keep their first MaxLabelValues values
// each; the rest are "other", the series count bounded whatever clients
// send.
func TestLabelsAreBounded(t *testing.T) {
	reg := prometheus.NewRegistry()
	o := NewObjective(reg)
	for i := range MaxLabelValues + 500 {
		o.Refused(Labels{Model: fmt.Sprint("model-", i), FairnessID: fmt.Sprint("flow-", i)}, ErrorNotFound)
	}
	if n := testutil.CollectAndCount(o.errors); n != MaxLabelValues+1 {
		t.Errorf("%d model series, want %d and other", n, MaxLabelValues+1)
	}
	if n := testutil.CollectAndCount(o.epp.errors); n != MaxLabelValues+1 {
		t.Errorf("%d llm_d_epp series, want %d and other", n, MaxLabelValues+1)
	}
	if got := testutil.ToFloat64(o.errors.WithLabelValues(OtherLabelValue, OtherLabelValue, ErrorNotFound)); got != 500 {
		t.Errorf("other = %v, want 500", got)
	}
	b := NewBoundedLabel(2)
	if b.Value("a") != "a" || b.Value("b") != "b" || b.Value("c") != OtherLabelValue || b.Value("a") != "a" || b.Value("") != "" {
		t.Error("BoundedLabel admits the wrong values")
	}
	b.Forget("a")
	if b.Value("c") != "c" {
		t.Error("a forgotten value makes no room")
	}
}
