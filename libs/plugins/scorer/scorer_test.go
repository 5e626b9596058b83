package scorer_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/hermod/hermod/libs/plugins/scorer"
	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/libs/scheduling/schedulingtest"
)

const tol = 1e-9

func approx(a, b, eps float64) bool { return math.Abs(a-b) <= eps }

// checkScores fails the test unless got matches want element-wise within tol.
func checkScores(t *testing.T, got, want []float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d scores %v, want %d %v", len(got), got, len(want), want)
	}
	for i := range want {
		if !approx(got[i], want[i], tol) {
			t.Errorf("score[%d] = %v, want %v (all: %v, want %v)", i, got[i], want[i], got, want)
		}
	}
}

// checkRange fails the test if a score falls outside [0, 1] (spec §5:
// every score in [0, 1]).
func checkRange(t *testing.T, scores []float64) {
	t.Helper()
	for i, s := range scores {
		if s < 0 || s > 1 || math.IsNaN(s) {
			t.Errorf("score[%d] = %v is outside [0, 1]", i, s)
		}
	}
}

// endpointsWith builds pod-0..pod-(n-1) with the given metrics (nil = no
// scrape yet).
func endpointsWith(ms ...*scheduling.Metrics) []*scheduling.Endpoint {
	eps := schedulingtest.Endpoints(len(ms))
	for i, m := range ms {
		eps[i].Metrics = m
	}
	return eps
}

func newScorer(t *testing.T, typ, params string) scheduling.Scorer {
	t.Helper()
	return schedulingtest.New[scheduling.Scorer](t, schedulingtest.NewHandle(), typ, "", params)
}

func req() *scheduling.Request { return schedulingtest.Completion("r1", "m", "hello") }

func TestRegisteredScorers(t *testing.T) {
	for _, typ := range []string{
		scorer.QueueType, scorer.RunningRequestsType, scorer.KVCacheType,
		scorer.LoadAwareType, scorer.LoRAAffinityType,
	} {
		t.Run(typ, func(t *testing.T) {
			h := schedulingtest.NewHandle()
			s := schedulingtest.New[scheduling.Scorer](t, h, typ, "", "")
			if got := s.TypedName(); got.Type != typ || got.Name != typ {
				t.Errorf("TypedName() = %+v, want type and name %q", got, typ)
			}
			named := schedulingtest.New[scheduling.Scorer](t, h, typ, "custom", "")
			if got := named.TypedName(); got.Type != typ || got.Name != "custom" {
				t.Errorf("TypedName() = %+v, want type %q name custom", got, typ)
			}
			// Unknown keys are warned about, not errors.
			h2 := schedulingtest.NewHandle()
			if _, err := schedulingtest.NewErr(h2, typ, "", `{"bogus": 1}`); err != nil {
				t.Errorf("unknown parameter: unexpected error %v", err)
			}
			if len(h2.Warnings) != 1 || !strings.Contains(h2.Warnings[0], "parameters.bogus") {
				t.Errorf("warnings = %q, want one naming parameters.bogus", h2.Warnings)
			}
			// Parameters that are not an object are errors.
			if _, err := schedulingtest.NewErr(schedulingtest.NewHandle(), typ, "", `[1]`); err == nil {
				t.Errorf("parameters [1]: expected an error")
			}
		})
	}
}

func TestQueueScorer(t *testing.T) {
	tests := []struct {
		name    string
		waiting []int
		want    []float64
	}{
		{"spec example 0,5,10", []int{0, 5, 10}, []float64{1, 0.5, 0}},
		{"unsorted", []int{10, 0, 5}, []float64{0, 1, 0.5}},
		{"min not zero", []int{4, 6, 8}, []float64{1, 0.5, 0}},
		{"quarters", []int{2, 3, 4, 5, 6}, []float64{1, 0.75, 0.5, 0.25, 0}},
		{"two endpoints", []int{2, 4}, []float64{1, 0}},
		{"all equal", []int{3, 3, 3}, []float64{1, 1, 1}},
		{"all zero", []int{0, 0}, []float64{1, 1}},
		{"single endpoint", []int{7}, []float64{1}},
	}
	s := newScorer(t, scorer.QueueType, "")
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			eps := schedulingtest.Waiting(tc.waiting...)
			for _, e := range eps {
				e.Metrics.RunningRequests = 99 // must be ignored
			}
			got := schedulingtest.Score(s, schedulingtest.CycleState(1), req(), eps)
			checkScores(t, got, tc.want)
			checkRange(t, got)
		})
	}
}

func TestQueueScorerNilMetricsCountAsIdle(t *testing.T) {
	s := newScorer(t, scorer.QueueType, "")
	tests := []struct {
		name string
		ms   []*scheduling.Metrics
		want []float64
	}{
		{"nil is zero waiting", []*scheduling.Metrics{nil, {WaitingRequests: 10}, {WaitingRequests: 5}}, []float64{1, 0, 0.5}},
		{"all nil", []*scheduling.Metrics{nil, nil}, []float64{1, 1}},
		{"nil equals zero", []*scheduling.Metrics{nil, {}}, []float64{1, 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := schedulingtest.Score(s, schedulingtest.CycleState(1), req(), endpointsWith(tc.ms...))
			checkScores(t, got, tc.want)
		})
	}
}

func TestRunningRequestsSizeScorer(t *testing.T) {
	tests := []struct {
		name    string
		running []int
		want    []float64
	}{
		{"0,5,10", []int{0, 5, 10}, []float64{1, 0.5, 0}},
		{"unsorted", []int{8, 4, 6}, []float64{0, 1, 0.5}},
		{"all equal", []int{2, 2, 2}, []float64{1, 1, 1}},
		{"single endpoint", []int{12}, []float64{1}},
	}
	s := newScorer(t, scorer.RunningRequestsType, "")
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			eps := schedulingtest.Endpoints(len(tc.running))
			for i, r := range tc.running {
				eps[i].Metrics.RunningRequests = r
				eps[i].Metrics.WaitingRequests = 100 - i*37 // must be ignored
			}
			got := schedulingtest.Score(s, schedulingtest.CycleState(1), req(), eps)
			checkScores(t, got, tc.want)
			checkRange(t, got)
		})
	}
	t.Run("nil metrics count as zero running", func(t *testing.T) {
		eps := endpointsWith(nil, &scheduling.Metrics{RunningRequests: 4}, &scheduling.Metrics{RunningRequests: 2})
		checkScores(t, schedulingtest.Score(s, schedulingtest.CycleState(1), req(), eps), []float64{1, 0, 0.5})
	})
}

func TestKVCacheUtilizationScorer(t *testing.T) {
	tests := []struct {
		name string
		kv   *scheduling.Metrics
		want float64
	}{
		{"empty cache", &scheduling.Metrics{KVCacheUsage: 0}, 1},
		{"quarter", &scheduling.Metrics{KVCacheUsage: 0.25}, 0.75},
		{"half", &scheduling.Metrics{KVCacheUsage: 0.5}, 0.5},
		{"0.9", &scheduling.Metrics{KVCacheUsage: 0.9}, 0.1},
		{"full", &scheduling.Metrics{KVCacheUsage: 1}, 0},
		{"nil metrics = idle", nil, 1},
	}
	s := newScorer(t, scorer.KVCacheType, "")
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := schedulingtest.Score(s, schedulingtest.CycleState(1), req(), endpointsWith(tc.kv))
			checkScores(t, got, []float64{tc.want})
		})
	}
	t.Run("independent per endpoint", func(t *testing.T) {
		eps := endpointsWith(&scheduling.Metrics{KVCacheUsage: 0.2}, nil, &scheduling.Metrics{KVCacheUsage: 0.8})
		checkScores(t, schedulingtest.Score(s, schedulingtest.CycleState(1), req(), eps), []float64{0.8, 1, 0.2})
	})
}

func TestLoadAwareScorer(t *testing.T) {
	tests := []struct {
		name    string
		params  string
		waiting int
		want    float64
	}{
		{"w=0 -> 0.5", "", 0, 0.5},
		{"w=1 default T=128", "", 1, 0.5 * (1 - 1.0/128)},
		{"w=32 default T=128", "", 32, 0.375},
		{"w=64 default T=128 -> 0.25", "", 64, 0.25},
		{"w=127 default T=128", "", 127, 0.5 / 128},
		{"w=T=128 -> 0", "", 128, 0},
		{"w>T -> 0", "", 500, 0},
		{"w=64 T=128 explicit", `{"threshold": 128}`, 64, 0.25},
		{"w=0 T=64", `{"threshold": 64}`, 0, 0.5},
		{"w=16 T=64", `{"threshold": 64}`, 16, 0.375},
		{"w=32 T=64", `{"threshold": 64}`, 32, 0.25},
		{"w=64 T=64 -> 0", `{"threshold": 64}`, 64, 0},
		{"w=65 T=64 -> 0", `{"threshold": 64}`, 65, 0},
		{"w=1 T=1 -> 0", `{"threshold": 1}`, 1, 0},
		{"null threshold keeps default", `{"threshold": null}`, 64, 0.25},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := schedulingtest.New[*scorer.LoadAware](t, schedulingtest.NewHandle(), scorer.LoadAwareType, "", tc.params)
			got := schedulingtest.Score(s, schedulingtest.CycleState(1), req(), schedulingtest.Waiting(tc.waiting))
			checkScores(t, got, []float64{tc.want})
			checkRange(t, got)
		})
	}
	t.Run("several endpoints", func(t *testing.T) {
		s := schedulingtest.New[*scorer.LoadAware](t, schedulingtest.NewHandle(), scorer.LoadAwareType, "", `{"threshold": 128}`)
		got := schedulingtest.Score(s, schedulingtest.CycleState(1), req(), schedulingtest.Waiting(0, 64, 128, 256))
		checkScores(t, got, []float64{0.5, 0.25, 0, 0})
	})
	t.Run("nil metrics count as w=0", func(t *testing.T) {
		s := schedulingtest.New[*scorer.LoadAware](t, schedulingtest.NewHandle(), scorer.LoadAwareType, "", "")
		got := schedulingtest.Score(s, schedulingtest.CycleState(1), req(), endpointsWith(nil, &scheduling.Metrics{WaitingRequests: 64}))
		checkScores(t, got, []float64{0.5, 0.25})
	})
}

func TestLoadAwareThreshold(t *testing.T) {
	tests := []struct {
		name      string
		params    string
		wantT     int
		wantWarn  bool
		w64Scores float64
	}{
		{"default", "", 128, false, 0.25},
		{"empty object", `{}`, 128, false, 0.25},
		{"explicit 64", `{"threshold": 64}`, 64, false, 0},
		{"zero -> 128 with warning", `{"threshold": 0}`, 128, true, 0.25},
		{"negative -> 128 with warning", `{"threshold": -5}`, 128, true, 0.25},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := schedulingtest.NewHandle()
			s := schedulingtest.New[*scorer.LoadAware](t, h, scorer.LoadAwareType, "", tc.params)
			p, ok := s.Parameters().(scorer.LoadAwareParams)
			if !ok {
				t.Fatalf("Parameters() = %T, want scorer.LoadAwareParams", s.Parameters())
			}
			if p.Threshold != tc.wantT {
				t.Errorf("threshold = %d, want %d", p.Threshold, tc.wantT)
			}
			warned := false
			for _, w := range h.Warnings {
				if strings.Contains(w, "threshold") {
					warned = true
				}
			}
			if warned != tc.wantWarn {
				t.Errorf("warnings = %q, want a threshold warning: %v", h.Warnings, tc.wantWarn)
			}
			got := schedulingtest.Score(s, schedulingtest.CycleState(1), req(), schedulingtest.Waiting(0, 64))
			checkScores(t, got, []float64{0.5, tc.w64Scores})
		})
	}
}

func TestLoadAwareInvalidParameters(t *testing.T) {
	for _, params := range []string{`{"threshold": "high"}`, `{"threshold": 1.5}`, `{"threshold": true}`, `{"threshold": [1]}`} {
		t.Run(params, func(t *testing.T) {
			_, err := schedulingtest.NewErr(schedulingtest.NewHandle(), scorer.LoadAwareType, "", params)
			if err == nil {
				t.Fatal("expected an error")
			}
			if !strings.Contains(err.Error(), "parameters.threshold") {
				t.Errorf("error %q does not name parameters.threshold", err)
			}
			var pe *scheduling.ParamError
			if !errors.As(err, &pe) || pe.Path != "parameters.threshold" {
				t.Errorf("error %v is not a ParamError at parameters.threshold", err)
			}
		})
	}
}

func TestLoRAScore(t *testing.T) {
	tests := []struct {
		name    string
		adapter string
		m       *scheduling.Metrics
		want    float64
	}{
		{"base model, empty metrics", "", &scheduling.Metrics{}, 1.0},
		{"base model, slots full", "", &scheduling.Metrics{MaxLoRAs: 1, RunningLoRAs: []string{"a"}}, 1.0},
		{"adapter running", "a", &scheduling.Metrics{MaxLoRAs: 4, RunningLoRAs: []string{"a"}}, 1.0},
		{"adapter running, slots full", "a", &scheduling.Metrics{MaxLoRAs: 2, RunningLoRAs: []string{"b", "a"}, WaitingLoRAs: []string{"c"}}, 1.0},
		{"adapter running and waiting", "a", &scheduling.Metrics{MaxLoRAs: 1, RunningLoRAs: []string{"a"}, WaitingLoRAs: []string{"a"}}, 1.0},
		{"free slot, nothing loaded", "a", &scheduling.Metrics{MaxLoRAs: 2}, 0.8},
		{"free slot, others running", "a", &scheduling.Metrics{MaxLoRAs: 3, RunningLoRAs: []string{"b", "c"}}, 0.8},
		{"free slot, others running and waiting", "a", &scheduling.Metrics{MaxLoRAs: 3, RunningLoRAs: []string{"b"}, WaitingLoRAs: []string{"c"}}, 0.8},
		{"free slot wins over adapter waiting", "a", &scheduling.Metrics{MaxLoRAs: 3, RunningLoRAs: []string{"b"}, WaitingLoRAs: []string{"a"}}, 0.8},
		{"slots full, adapter waiting", "a", &scheduling.Metrics{MaxLoRAs: 2, RunningLoRAs: []string{"b"}, WaitingLoRAs: []string{"a"}}, 0.6},
		{"slots over-full, adapter waiting", "a", &scheduling.Metrics{MaxLoRAs: 1, RunningLoRAs: []string{"b", "c"}, WaitingLoRAs: []string{"a"}}, 0.6},
		{"slots full, adapter absent", "a", &scheduling.Metrics{MaxLoRAs: 2, RunningLoRAs: []string{"b", "c"}}, 0.0},
		{"slots full by waiting, adapter absent", "a", &scheduling.Metrics{MaxLoRAs: 2, RunningLoRAs: []string{"b"}, WaitingLoRAs: []string{"c"}}, 0.0},
		{"no LoRA info (max_lora 0)", "a", &scheduling.Metrics{}, 0.0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := scorer.LoRAScore(tc.adapter, tc.m); !approx(got, tc.want, tol) {
				t.Errorf("LoRAScore(%q, %+v) = %v, want %v", tc.adapter, tc.m, got, tc.want)
			}
			// The plugin gives the same score through the Scorer interface.
			s := newScorer(t, scorer.LoRAAffinityType, "")
			r := req()
			r.Adapter = tc.adapter
			checkScores(t, schedulingtest.Score(s, schedulingtest.CycleState(1), r, endpointsWith(tc.m)), []float64{tc.want})
		})
	}
}

func TestLoRAAffinityScorer(t *testing.T) {
	s := newScorer(t, scorer.LoRAAffinityType, "")
	eps := endpointsWith(
		&scheduling.Metrics{MaxLoRAs: 2, RunningLoRAs: []string{"x", "y"}},                            // full, absent -> 0
		&scheduling.Metrics{MaxLoRAs: 2, RunningLoRAs: []string{"sql"}},                               // free slot -> 0.8
		&scheduling.Metrics{MaxLoRAs: 2, RunningLoRAs: []string{"x"}, WaitingLoRAs: []string{"chat"}}, // full, waiting -> 0.6
		&scheduling.Metrics{MaxLoRAs: 1, RunningLoRAs: []string{"chat"}},                              // running -> 1
		nil, // no metrics yet -> 0 for an adapter
	)
	r := req()
	r.Adapter = "chat"
	got := schedulingtest.Score(s, schedulingtest.CycleState(1), r, eps)
	checkScores(t, got, []float64{0, 0.8, 0.6, 1, 0})
	checkRange(t, got)

	t.Run("base model scores 1 everywhere", func(t *testing.T) {
		r := req()
		r.Adapter = ""
		checkScores(t, schedulingtest.Score(s, schedulingtest.CycleState(1), r, eps), []float64{1, 1, 1, 1, 1})
	})
}
