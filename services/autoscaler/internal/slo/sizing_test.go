package slo

import (
	"errors"
	"math"
	"testing"

	"github.com/hermod/hermod/services/autoscaler/internal/scaling"
)

var defaultWorkload = Workload{InputTokens: 1000, OutputTokens: 200}

func TestInferTargets(t *testing.T) {
	tests := []struct {
		name      string
		p         Params
		w         Workload
		k         float64
		ttft, itl float64
	}{
		// TTFT = 3 x 10 + (0.1 + 0.001) x 100 = 30 + 10.1 = 40.1
		// ITL  = 3 x 10 + 0.1 + 0.001 x (100 + 10/2) = 30.1 + 0.105 = 30.205
		{"example A k=3", exampleA.p, exampleA.w, 3, 40.1, 30.205},
		// TTFT = 3 x 5 + 0.05005 x 1000 = 15 + 50.05 = 65.05
		// ITL  = 15 + 0.05 + 0.00005 x (1000 + 201/2) = 15.05 + 0.055025 = 15.105025
		{"defaults k=3", DefaultParams(), defaultWorkload, 3, 65.05, 15.105025},
		// k = 2: 10 + 50.05 = 60.05 and 10.05 + 0.055025 = 10.105025
		{"defaults k=2", DefaultParams(), defaultWorkload, 2, 60.05, 10.105025},
		// Prefill only (o 0): ITL = 3 x 5 + 0.05 + 0.00005 x (1000 + 1/2) = 15.10002500
		{"prefill only", DefaultParams(), Workload{InputTokens: 1000}, 3, 65.05, 15.100025},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := InferTargets(tc.p, tc.w, tc.k)
			if err != nil {
				t.Fatal(err)
			}
			near(t, "TTFT", got.TTFTMs, tc.ttft, 1e-12)
			near(t, "ITL", got.ITLMs, tc.itl, 1e-12)
		})
	}
	for _, k := range []float64{0, 1, -3, math.NaN(), math.Inf(1)} {
		if _, err := InferTargets(DefaultParams(), defaultWorkload, k); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("InferTargets(k=%v) error %v, want ErrInvalidConfig", k, err)
		}
	}
}

func TestConfigTargets(t *testing.T) {
	p := DefaultParams()
	tests := []struct {
		name      string
		cfg       Config
		ttft, itl float64
	}{
		{"inferred default k", Config{}, 65.05, 15.105025},
		{"inferred k=4", Config{SLOMultiplier: 4}, 70.05, 20.105025},
		{"explicit", Config{TargetTTFT: 500, TargetITL: 100}, 500, 100},
		{"explicit TTFT only", Config{TargetTTFT: 500}, 500, 15.105025},
		{"explicit ITL only", Config{TargetITL: 100}, 65.05, 100},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.cfg.Targets(p, defaultWorkload)
			if err != nil {
				t.Fatal(err)
			}
			near(t, "TTFT", got.TTFTMs, tc.ttft, 1e-12)
			near(t, "ITL", got.ITLMs, tc.itl, 1e-12)
		})
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"zero", Config{}, true},
		{"reference/004 override", Config{TargetTTFT: 500, TargetITL: 100}, true},
		{"reference/004 default", Config{SLOMultiplier: 3, TuningEnabled: true}, true},
		{"negative TTFT", Config{TargetTTFT: -1}, false},
		{"NaN ITL", Config{TargetITL: math.NaN()}, false},
		{"multiplier 1", Config{SLOMultiplier: 1}, false},
		{"multiplier below 1", Config{SLOMultiplier: 0.5}, false},
		{"negative queue", Config{MaxQueueSize: -1}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if (err == nil) != tc.ok {
				t.Fatalf("Validate = %v, want ok=%v", err, tc.ok)
			}
			if err != nil && !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("error %v does not wrap ErrInvalidConfig", err)
			}
		})
	}
}

func TestConfigQueue(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		v    *scaling.Variant
		want Queue
	}{
		{"defaults", Config{}, &scaling.Variant{}, Queue{MaxBatch: 256, MaxQueue: 256}},
		{"variant seqs", Config{}, &scaling.Variant{MaxNumSeqs: 64}, Queue{MaxBatch: 64, MaxQueue: 64}},
		{"explicit queue", Config{MaxQueueSize: 1000}, &scaling.Variant{MaxNumSeqs: 64}, Queue{MaxBatch: 64, MaxQueue: 1000}},
		{"nil variant", Config{}, nil, Queue{MaxBatch: 256, MaxQueue: 256}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.cfg.Queue(tc.v); got != tc.want {
				t.Fatalf("Queue = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestMaxRateWorkedExample uses example B (TestSolveWorkedExamples):
// S = 100 ms and ITL = 10 ms at every rate (D(n) = 100 for all n), and
// TTFT = W + 20 with W = 10 ms exactly at 10 requests/s. W grows with the
// rate, so for targets TTFT 30 ms, ITL 10.5 ms, lambda* = 10 requests/s.
func TestMaxRateWorkedExample(t *testing.T) {
	m := mustModel(t, Params{Alpha: 10}, Workload{OutputTokens: 9}, Queue{MaxBatch: 2, MaxQueue: 1})
	got, err := m.MaxRate(Targets{TTFTMs: 30, ITLMs: 10.5})
	if err != nil {
		t.Fatal(err)
	}
	if got > 10 || got < 10*(1-rateTolerance) {
		t.Fatalf("lambda* = %.12g, want 10 within %g below", got, rateTolerance)
	}
	// Targets met at mu(N) = 20/s: the whole range is feasible.
	got, err = m.MaxRate(Targets{TTFTMs: 1000, ITLMs: 1000})
	if err != nil || got != 20 {
		t.Fatalf("lambda* = %v, %v; want mu(N) = 20", got, err)
	}
}

// TestMaxRateMeetsTargets: lambda* meets both targets and a rate 1e-5
// above it misses one (the search stops within 1e-6).
func TestMaxRateMeetsTargets(t *testing.T) {
	tests := []struct {
		name string
		w    Workload
		q    Queue
		t    Targets
	}{
		{"inferred K=512", defaultWorkload, Queue{MaxBatch: 256, MaxQueue: 256}, Targets{TTFTMs: 65.05, ITLMs: 15.105025}},
		{"TTFT bound", defaultWorkload, Queue{MaxBatch: 256, MaxQueue: 256}, Targets{TTFTMs: 100, ITLMs: 1000}},
		{"ITL bound", defaultWorkload, Queue{MaxBatch: 64, MaxQueue: 64}, Targets{TTFTMs: 10000, ITLMs: 8}},
		{"long prompts", Workload{InputTokens: 8000, OutputTokens: 50}, Queue{MaxBatch: 32, MaxQueue: 32}, Targets{TTFTMs: 2000, ITLMs: 50}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := mustModel(t, DefaultParams(), tc.w, tc.q)
			rate, err := m.MaxRate(tc.t)
			if err != nil {
				t.Fatal(err)
			}
			if rate <= 0 || rate > m.MaxServiceRatePerSecond() {
				t.Fatalf("lambda* %v outside (0, mu(N) = %v]", rate, m.MaxServiceRatePerSecond())
			}
			at, _ := m.Solve(rate)
			if at.TTFTMs > tc.t.TTFTMs || at.ITLMs > tc.t.ITLMs {
				t.Fatalf("at lambda* %v: TTFT %v ITL %v miss %+v", rate, at.TTFTMs, at.ITLMs, tc.t)
			}
			if rate < m.MaxServiceRatePerSecond() {
				above, _ := m.Solve(rate * (1 + 1e-5))
				if above.TTFTMs <= tc.t.TTFTMs && above.ITLMs <= tc.t.ITLMs {
					t.Fatalf("1e-5 above lambda* %v still meets %+v: not the largest", rate, tc.t)
				}
			}
		})
	}
}

func TestMaxRateMonotoneInTargets(t *testing.T) {
	m := mustModel(t, DefaultParams(), defaultWorkload, Queue{MaxBatch: 256, MaxQueue: 256})
	sweeps := []struct {
		name    string
		targets func(x float64) Targets
	}{
		{"TTFT", func(x float64) Targets { return Targets{TTFTMs: x, ITLMs: 1e9} }},
		{"ITL", func(x float64) Targets { return Targets{TTFTMs: 1e9, ITLMs: x / 5} }},
		{"both", func(x float64) Targets { return Targets{TTFTMs: x, ITLMs: x / 5} }},
	}
	for _, sw := range sweeps {
		t.Run(sw.name, func(t *testing.T) {
			prev := 0.0
			for x := 62.0; x < 400; x *= 1.15 {
				rate, err := m.MaxRate(sw.targets(x))
				if errors.Is(err, ErrInfeasible) {
					if prev > 0 {
						t.Fatalf("target %v infeasible after a feasible smaller one", x)
					}
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				if rate < prev {
					t.Fatalf("target %v: lambda* %v below %v for a tighter target", x, rate, prev)
				}
				prev = rate
			}
			if prev == 0 {
				t.Fatal("no target in the sweep was feasible")
			}
		})
	}
}

func TestMaxRateInfeasible(t *testing.T) {
	m := mustModel(t, DefaultParams(), defaultWorkload, Queue{MaxBatch: 256, MaxQueue: 256})
	// Idle TTFT = Tp(0) + ITL0 = 55.05 + (1147.105 - 55.05)/200 = 60.510275 ms:
	// D(1) = Tp(1) + 200 Td(1) = 55.40350746 + 200 x 5.45850746 = 1147.10500.
	near(t, "idle TTFT", m.Idle().TTFTMs, 55.05+(55.403507462686567+200*5.458507462686567-55.05)/200, 1e-9)
	// The inferred TTFT target at k = 2 is 60.05 < 60.51: infeasible.
	target, err := InferTargets(DefaultParams(), defaultWorkload, 2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.MaxRate(target); !errors.Is(err, ErrInfeasible) {
		t.Fatalf("MaxRate(%+v) error %v, want ErrInfeasible", target, err)
	}
	for _, bad := range []Targets{{}, {TTFTMs: 1}, {TTFTMs: math.NaN(), ITLMs: 1}, {TTFTMs: 1, ITLMs: math.Inf(1)}} {
		if _, err := m.MaxRate(bad); !errors.Is(err, ErrInvalidTargets) {
			t.Fatalf("MaxRate(%+v) error %v, want ErrInvalidTargets", bad, err)
		}
	}
}

func TestReplicas(t *testing.T) {
	tests := []struct {
		total, per float64
		want       int
	}{
		{0, 3, 0},
		{10, 2.5, 4},
		{10.1, 2.5, 5},
		{1.1, 0.1, 11}, // 1.1/0.1 = 11.000000000000002 in float64
		{0.3, 0.1, 3},  // 2.9999999999999996
		{0.7, 0.1, 7},
		{1e-9, 5, 1},
		{5, 5, 1},
		{5.001, 5, 2},
	}
	for _, tc := range tests {
		got, err := Replicas(tc.total, tc.per)
		if err != nil || got != tc.want {
			t.Errorf("Replicas(%v, %v) = %d, %v; want %d", tc.total, tc.per, got, err, tc.want)
		}
	}
	for _, bad := range [][2]float64{{1, 0}, {1, -1}, {-1, 1}, {math.NaN(), 1}, {1, math.Inf(1)}, {1e300, 1e-300}} {
		if _, err := Replicas(bad[0], bad[1]); !errors.Is(err, ErrInvalidRate) {
			t.Errorf("Replicas(%v, %v) error %v, want ErrInvalidRate", bad[0], bad[1], err)
		}
	}
}

// TestReplicasFromMaxRate: ceil(rate / lambda*) replicas carry the rate
// within the targets and one fewer do not.
func TestReplicasFromMaxRate(t *testing.T) {
	m := mustModel(t, DefaultParams(), defaultWorkload, Queue{MaxBatch: 256, MaxQueue: 256})
	per, err := m.MaxRate(Targets{TTFTMs: 65.05, ITLMs: 15.105025})
	if err != nil {
		t.Fatal(err)
	}
	for _, total := range []float64{0.5, per, 3 * per, 3*per + 0.01, 17.3 * per} {
		n, err := Replicas(total, per)
		if err != nil {
			t.Fatal(err)
		}
		if want := int(math.Ceil(total/per - 1e-9)); n != want {
			t.Fatalf("total %v: %d replicas, want ceil = %d", total, n, want)
		}
		if float64(n)*per < total*(1-1e-9) || float64(n-1)*per >= total {
			t.Fatalf("total %v, lambda* %v: %d replicas is not the smallest sufficient count", total, per, n)
		}
	}
}
