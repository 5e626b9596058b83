package slo

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/hermod/hermod/services/autoscaler/internal/scaling"
)

// analyzeFixture is a model with two variants: "small" (MaxNumSeqs 64,
// default parameters) and "big" (MaxNumSeqs 256, learned parameters).
type analyzeFixture struct {
	cfg     Config
	learned map[string]Params
	// capSmall and capBig are lambda* computed directly with the model.
	capSmall, capBig float64
}

func newAnalyzeFixture(t *testing.T) analyzeFixture {
	t.Helper()
	f := analyzeFixture{
		cfg:     Config{TargetTTFT: 500, TargetITL: 30},
		learned: map[string]Params{"big": {Alpha: 3, Beta: 0.03, Gamma: 0.00003}},
	}
	targets := Targets{TTFTMs: 500, ITLMs: 30}
	var err error
	small := mustModel(t, DefaultParams(), defaultWorkload, Queue{MaxBatch: 64, MaxQueue: 64})
	if f.capSmall, err = small.MaxRate(targets); err != nil {
		t.Fatal(err)
	}
	big := mustModel(t, f.learned["big"], defaultWorkload, Queue{MaxBatch: 256, MaxQueue: 256})
	if f.capBig, err = big.MaxRate(targets); err != nil {
		t.Fatal(err)
	}
	return f
}

// model builds the scaling.Model: small has `smallReady` ready replicas
// of `smallCurrent`, big has one ready of one; every ready replica
// receives `perReplica` requests per second with the default workload.
func (f analyzeFixture) model(smallReady, smallCurrent int, perReplica float64) *scaling.Model {
	replicas := func(variant string, n int) []scaling.Replica {
		out := make([]scaling.Replica, n)
		for i := range out {
			out[i] = scaling.Replica{
				Name: variant, Variant: variant, ArrivalRate: perReplica,
				AvgInputTokens: defaultWorkload.InputTokens, AvgOutputTokens: defaultWorkload.OutputTokens,
			}
		}
		return out
	}
	return &scaling.Model{
		ID: "llama",
		Variants: []*scaling.Variant{
			{Name: "small", MaxNumSeqs: 64, Current: smallCurrent, Ready: smallReady, Replicas: replicas("small", smallReady)},
			{Name: "big", MaxNumSeqs: 256, Current: 1, Ready: 1, Replicas: replicas("big", 1)},
		},
	}
}

func TestAnalyze(t *testing.T) {
	f := newAnalyzeFixture(t)
	if f.capSmall >= f.capBig {
		t.Fatalf("fixture: small %v should have less capacity than big %v", f.capSmall, f.capBig)
	}
	tests := []struct {
		name                 string
		smallReady, smallCur int
		perReplica           float64 // requests/s per ready replica
		// want in terms of the capacities:
		demand, required, spare func() float64
	}{
		{
			// 3 ready replicas at 2 x capBig each: demand 6 capBig;
			// anticipated 3 capSmall + capBig (one small pending).
			name: "scale up", smallReady: 2, smallCur: 3, perReplica: 2 * f.capBig,
			demand:   func() float64 { return 6 * f.capBig },
			required: func() float64 { return 6*f.capBig - 3*f.capSmall - f.capBig },
			spare:    func() float64 { return 0 },
		},
		{
			// Demand 3 x 0.1 capSmall; supply (ready only) 2 capSmall + capBig.
			name: "spare", smallReady: 2, smallCur: 3, perReplica: 0.1 * f.capSmall,
			demand:   func() float64 { return 0.3 * f.capSmall },
			required: func() float64 { return 0 },
			spare:    func() float64 { return 2*f.capSmall + f.capBig - 0.3*f.capSmall },
		},
		{
			// Demand between ready supply (capSmall + capBig) and
			// anticipated (2 capSmall + capBig): the pending replica covers
			// it, nothing is spare.
			name: "pending covers", smallReady: 1, smallCur: 2, perReplica: (f.capSmall + f.capBig + 0.5*f.capSmall) / 2,
			demand:   func() float64 { return f.capSmall + f.capBig + 0.5*f.capSmall },
			required: func() float64 { return 0 },
			spare:    func() float64 { return 0 },
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Analyze(f.model(tc.smallReady, tc.smallCur, tc.perReplica), f.learned, f.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if got.Analyzer != "slo" || got.ModelID != "llama" || got.Hold || got.Priority != 1 {
				t.Fatalf("header %+v", got)
			}
			near(t, "capacity small", got.VariantCapacity["small"], f.capSmall, 1e-12)
			near(t, "capacity big", got.VariantCapacity["big"], f.capBig, 1e-12)
			near(t, "demand", got.Demand, tc.demand(), 1e-9)
			near(t, "required", got.Required, tc.required(), 1e-9)
			near(t, "spare", got.Spare, tc.spare(), 1e-9)
			near(t, "supply", got.Supply, float64(tc.smallReady)*f.capSmall+f.capBig, 1e-9)
			if got.Required > 0 && got.Spare > 0 {
				t.Fatal("both required and spare positive")
			}
			text := strings.Join(got.Reasons, "\n")
			for _, want := range []string{"variant small: default params", "variant big: learned params", "explicit", "lambda*", "demand"} {
				if !strings.Contains(text, want) {
					t.Fatalf("reasons lack %q:\n%s", want, text)
				}
			}
		})
	}
}

func TestAnalyzeInferredTargets(t *testing.T) {
	f := newAnalyzeFixture(t)
	got, err := Analyze(f.model(1, 1, 1), f.learned, Config{SLOMultiplier: 3})
	if err != nil {
		t.Fatal(err)
	}
	// Each variant's inferred targets come from its own parameters.
	target, err := InferTargets(DefaultParams(), defaultWorkload, 3)
	if err != nil {
		t.Fatal(err)
	}
	want, err := mustModel(t, DefaultParams(), defaultWorkload, Queue{MaxBatch: 64, MaxQueue: 64}).MaxRate(target)
	if err != nil {
		t.Fatal(err)
	}
	near(t, "capacity small", got.VariantCapacity["small"], want, 1e-12)
	if !strings.Contains(strings.Join(got.Reasons, "\n"), "inferred with k=3") {
		t.Fatalf("reasons: %q", got.Reasons)
	}
}

func TestAnalyzeHolds(t *testing.T) {
	f := newAnalyzeFixture(t)

	t.Run("no token averages", func(t *testing.T) {
		m := f.model(1, 1, 2)
		for _, v := range m.Variants {
			for i := range v.Replicas {
				v.Replicas[i].AvgInputTokens, v.Replicas[i].AvgOutputTokens = 0, 0
			}
		}
		got, err := Analyze(m, f.learned, f.cfg)
		if err != nil {
			t.Fatal(err)
		}
		if !got.Hold || got.Required != 0 || got.Spare != 0 || got.Demand != 4 {
			t.Fatalf("got %+v, want a hold with demand 4", got)
		}
	})

	t.Run("every variant infeasible", func(t *testing.T) {
		got, err := Analyze(f.model(1, 1, 2), f.learned, Config{TargetTTFT: 1, TargetITL: 1})
		if err != nil {
			t.Fatal(err)
		}
		if !got.Hold || len(got.VariantCapacity) != 0 || got.Required != 0 {
			t.Fatalf("got %+v, want a hold without capacities", got)
		}
	})

	t.Run("one variant infeasible", func(t *testing.T) {
		learned := map[string]Params{"big": {Alpha: 400, Beta: 0.03, Gamma: 0.00003}}
		got, err := Analyze(f.model(1, 1, 0.1), learned, f.cfg)
		if err != nil {
			t.Fatal(err)
		}
		if got.Hold || len(got.VariantCapacity) != 1 || got.VariantCapacity["small"] == 0 {
			t.Fatalf("got %+v, want only small with capacity", got)
		}
		near(t, "supply", got.Supply, f.capSmall, 1e-9)
		if !strings.Contains(strings.Join(got.Reasons, "\n"), "no capacity") {
			t.Fatalf("reasons: %q", got.Reasons)
		}
	})
}

func TestAnalyzeErrors(t *testing.T) {
	f := newAnalyzeFixture(t)
	tests := []struct {
		name    string
		model   func() *scaling.Model
		learned map[string]Params
		cfg     Config
		target  error
	}{
		{"nil model", func() *scaling.Model { return nil }, nil, Config{}, nil},
		{"bad config", func() *scaling.Model { return f.model(1, 1, 1) }, nil, Config{SLOMultiplier: 0.5}, ErrInvalidConfig},
		{"negative rate", func() *scaling.Model {
			m := f.model(1, 1, 1)
			m.Variants[0].Replicas[0].ArrivalRate = -1
			return m
		}, nil, Config{}, ErrInvalidRate},
		{"NaN tokens", func() *scaling.Model {
			m := f.model(1, 1, 1)
			m.Variants[1].Replicas[0].AvgInputTokens = math.NaN()
			return m
		}, nil, Config{}, ErrInvalidWorkload},
		{"bad learned params", func() *scaling.Model { return f.model(1, 1, 1) }, map[string]Params{"big": {}}, Config{}, ErrInvalidParams},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Analyze(tc.model(), tc.learned, tc.cfg)
			if err == nil {
				t.Fatal("no error")
			}
			if tc.target != nil && !errors.Is(err, tc.target) {
				t.Fatalf("error %v, want %v", err, tc.target)
			}
		})
	}
}

func TestModelWorkload(t *testing.T) {
	mk := func(rs ...scaling.Replica) *scaling.Model {
		return &scaling.Model{Variants: []*scaling.Variant{{Name: "v", Replicas: rs}}}
	}
	tests := []struct {
		name string
		m    *scaling.Model
		want Workload
		ok   bool
	}{
		{
			// (1 x 1000 + 3 x 200)/4 = 400 in, (1 x 100 + 3 x 300)/4 = 250 out;
			// the replica without completions is left out.
			name: "rate weighted",
			m: mk(
				scaling.Replica{ArrivalRate: 1, AvgInputTokens: 1000, AvgOutputTokens: 100},
				scaling.Replica{ArrivalRate: 3, AvgInputTokens: 200, AvgOutputTokens: 300},
				scaling.Replica{ArrivalRate: 5},
			),
			want: Workload{InputTokens: 400, OutputTokens: 250}, ok: true,
		},
		{
			// No traffic: plain mean (1000 + 200)/2 = 600, (100 + 300)/2 = 200.
			name: "no traffic",
			m: mk(
				scaling.Replica{AvgInputTokens: 1000, AvgOutputTokens: 100},
				scaling.Replica{AvgInputTokens: 200, AvgOutputTokens: 300},
			),
			want: Workload{InputTokens: 600, OutputTokens: 200}, ok: true,
		},
		{
			name: "output below one raised",
			m:    mk(scaling.Replica{ArrivalRate: 1, AvgInputTokens: 50, AvgOutputTokens: 0.4}),
			want: Workload{InputTokens: 50, OutputTokens: 1}, ok: true,
		},
		{name: "nothing completed", m: mk(scaling.Replica{ArrivalRate: 2}), ok: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok, err := modelWorkload(tc.m)
			if err != nil || ok != tc.ok || got != tc.want {
				t.Fatalf("modelWorkload = %+v, %v, %v; want %+v, %v", got, ok, err, tc.want, tc.ok)
			}
		})
	}
}
