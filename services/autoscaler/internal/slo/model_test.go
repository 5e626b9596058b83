package slo

import (
	"errors"
	"math"
	"testing"
)

func TestSolveWorkedExamples(t *testing.T) {
	tests := []struct {
		name string
		p    Params
		w    Workload
		q    Queue
		rate float64 // requests per second
		want Metrics
		// probs are p(0..K).
		probs []float64
	}{
		{
			// Example B: alpha 10, beta = gamma = 0, i 0, o 9, N 2, K 3.
			// T = Tp = Td = 10 ms, D(n) = 10 + 9 x 10 = 100 ms, so
			// mu(n) = n/100 per ms = 10 n per s: mu(1) = 10, mu(2) = 20.
			// lambda 10/s: p1/p0 = 10/10 = 1, p2/p1 = 10/20, p3/p2 = 10/20,
			// unnormalised 1, 1, 1/2, 1/4 (sum 11/4), so
			// p = 4/11, 4/11, 2/11, 1/11.
			// X = 10 (1 - 1/11) = 100/11 /s; L = (4 + 2x2 + 3x1)/11 = 1;
			// nbar = (4 + 2x2 + 2x1)/11 = 10/11.
			// R = L/X = 11/100 s = 110 ms; S = nbar/X = 100 ms; W = 10 ms.
			// Tp(nbar) = 10; ITL = (100 - 10)/9 = 10; TTFT = 10 + 10 + 10 = 30.
			name: "B decode",
			p:    Params{Alpha: 10}, w: Workload{OutputTokens: 9}, q: Queue{MaxBatch: 2, MaxQueue: 1}, rate: 10,
			want: Metrics{
				ArrivalRatePerSecond: 10, ThroughputPerSecond: 100.0 / 11, BlockingProbability: 1.0 / 11,
				AvgInSystem: 1, AvgBatch: 10.0 / 11, ResponseTimeMs: 110, ServiceTimeMs: 100, WaitTimeMs: 10,
				PrefillTimeMs: 10, ITLMs: 10, TTFTMs: 30,
			},
			probs: []float64{4.0 / 11, 4.0 / 11, 2.0 / 11, 1.0 / 11},
		},
		{
			// Example C: prefill only, alpha 100, i 0, o 0: D(n) = Tp(n) =
			// 100 ms, the same chain as B. ITL = 0 and TTFT = W + S = R = 110.
			name: "C prefill only",
			p:    Params{Alpha: 100}, w: Workload{}, q: Queue{MaxBatch: 2, MaxQueue: 1}, rate: 10,
			want: Metrics{
				ArrivalRatePerSecond: 10, ThroughputPerSecond: 100.0 / 11, BlockingProbability: 1.0 / 11,
				AvgInSystem: 1, AvgBatch: 10.0 / 11, ResponseTimeMs: 110, ServiceTimeMs: 100, WaitTimeMs: 10,
				PrefillTimeMs: 100, ITLMs: 0, TTFTMs: 110,
			},
			probs: []float64{4.0 / 11, 4.0 / 11, 2.0 / 11, 1.0 / 11},
		},
		{
			// Example D: alpha 10, beta 1, gamma 0, i 0, o 9, N 2, K 3,
			// lambda 10/s = 0.01/ms. f = 9/10, so T(n) = 10 + 0.9 n = Tp(n),
			// Td(n) = T(n) + 1, D(n) = 10 T(n) + 9 = 109 + 9n:
			// D(1) = 118, D(2) = 127 ms; lambda/mu(1) = 0.01 x 118 = 1.18,
			// lambda/mu(2) = 0.01 x 127/2 = 0.635.
			// Unnormalised 1, 1.18, 0.7493, 0.4758055; sum 3.4051055.
			// L    = (1.18 + 2x0.7493 + 3x0.4758055)/3.4051055 = 4.1060165/3.4051055
			// nbar = (1.18 + 2x0.7493 + 2x0.4758055)/3.4051055 = 3.630211/3.4051055
			// 1 - p(K) = 2.9293/3.4051055; X = 10 x that = 8.602670314 /s
			// R = 4.1060165/0.029293 = 140.1705698 ms
			// S = 3.630211/0.029293 = 123.9275936 ms
			// W = 0.4758055/0.029293 = 16.24297614 ms
			// Tp(nbar) = 10 + 0.9 x 1.066108231 = 10.95949741
			// ITL = (123.9275936 - 10.95949741)/9 = 12.55201069
			// TTFT = 16.24297614 + 10.95949741 + 12.55201069 = 39.75448424
			name: "D batch-dependent",
			p:    Params{Alpha: 10, Beta: 1}, w: Workload{OutputTokens: 9}, q: Queue{MaxBatch: 2, MaxQueue: 1}, rate: 10,
			want: Metrics{
				ArrivalRatePerSecond: 10, ThroughputPerSecond: 10 * 2.9293 / 3.4051055,
				BlockingProbability: 0.4758055 / 3.4051055,
				AvgInSystem:         4.1060165 / 3.4051055, AvgBatch: 3.630211 / 3.4051055,
				ResponseTimeMs: 4.1060165 / 0.029293, ServiceTimeMs: 3.630211 / 0.029293, WaitTimeMs: 0.4758055 / 0.029293,
				PrefillTimeMs: 10 + 0.9*3.630211/3.4051055,
				ITLMs:         (3.630211/0.029293 - 10 - 0.9*3.630211/3.4051055) / 9,
				TTFTMs:        39.75448423588733,
			},
			probs: []float64{1 / 3.4051055, 1.18 / 3.4051055, 0.7493 / 3.4051055, 0.4758055 / 3.4051055},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := mustModel(t, tc.p, tc.w, tc.q)
			got, err := m.Solve(tc.rate)
			if err != nil {
				t.Fatal(err)
			}
			const tol = 1e-9
			near(t, "lambda", got.ArrivalRatePerSecond, tc.want.ArrivalRatePerSecond, tol)
			near(t, "X", got.ThroughputPerSecond, tc.want.ThroughputPerSecond, tol)
			near(t, "p(K)", got.BlockingProbability, tc.want.BlockingProbability, tol)
			near(t, "L", got.AvgInSystem, tc.want.AvgInSystem, tol)
			near(t, "nbar", got.AvgBatch, tc.want.AvgBatch, tol)
			near(t, "R", got.ResponseTimeMs, tc.want.ResponseTimeMs, tol)
			near(t, "S", got.ServiceTimeMs, tc.want.ServiceTimeMs, tol)
			near(t, "W", got.WaitTimeMs, tc.want.WaitTimeMs, tol)
			near(t, "Tp(nbar)", got.PrefillTimeMs, tc.want.PrefillTimeMs, tol)
			near(t, "ITL", got.ITLMs, tc.want.ITLMs, tol)
			near(t, "TTFT", got.TTFTMs, tc.want.TTFTMs, tol)
			for n, want := range tc.probs {
				near(t, "p(n)", m.p[n], want, tol)
			}
			// The identities the spec states: X = lambda (1 - p(K)) and
			// W = R - S.
			near(t, "X identity", got.ThroughputPerSecond, tc.rate*(1-got.BlockingProbability), tol)
			near(t, "W identity", got.WaitTimeMs, got.ResponseTimeMs-got.ServiceTimeMs, tol)
		})
	}
}

// TestChainMatchesTextbookMM1K: with N = 1 the service rate is constant,
// mu = mu(1), and the chain is the textbook M/M/1/K queue:
// p_n = (1-rho) rho^n / (1 - rho^(K+1)) and
// L = rho/(1-rho) - (K+1) rho^(K+1) / (1 - rho^(K+1)), rho = lambda/mu.
func TestChainMatchesTextbookMM1K(t *testing.T) {
	p := DefaultParams()
	w := Workload{InputTokens: 1000, OutputTokens: 200}
	for _, k := range []int{1, 5, 64, 300} {
		for _, rho := range []float64{1e-4, 0.1, 0.5, 0.9, 0.999, 1.5, 4} {
			m := mustModel(t, p, w, Queue{MaxBatch: 1, MaxQueue: k - 1})
			mu := m.MaxServiceRatePerSecond()
			got, err := m.Solve(rho * mu)
			if err != nil {
				t.Fatal(err)
			}
			norm := (1 - rho) / (1 - math.Pow(rho, float64(k+1)))
			for n := 0; n <= k; n++ {
				want := norm * math.Pow(rho, float64(n))
				if math.Abs(m.p[n]-want) > 1e-9 {
					t.Fatalf("K=%d rho=%v: p(%d) = %.15g, textbook %.15g", k, rho, n, m.p[n], want)
				}
			}
			rk := math.Pow(rho, float64(k+1))
			wantL := rho/(1-rho) - float64(k+1)*rk/(1-rk)
			if math.Abs(got.AvgInSystem-wantL) > 1e-9*max(1, wantL) {
				t.Fatalf("K=%d rho=%v: L = %.15g, textbook %.15g", k, rho, got.AvgInSystem, wantL)
			}
			// Textbook throughput lambda (1 - p_K) and R = L / X (Little).
			wantX := rho * mu * (1 - norm*math.Pow(rho, float64(k)))
			near(t, "X", got.ThroughputPerSecond, wantX, 1e-9)
			near(t, "R", got.ResponseTimeMs, 1000*wantL/wantX, 1e-9)
		}
	}
}

// TestIdleWorkedExample checks the lambda -> 0 limit for example A:
// Tp(0) = 20.1 and D(1) = 123.8855 ms (TestPerformanceFormulas), so
// ITL0 = (123.8855 - 20.1)/9 = 103.7855/9 = 11.53172222 ms and
// TTFT0 = 20.1 + 11.53172222 = 31.63172222 ms.
func TestIdleWorkedExample(t *testing.T) {
	m := mustModel(t, exampleA.p, exampleA.w, Queue{MaxBatch: 8, MaxQueue: 8})
	idle := m.Idle()
	near(t, "ITL0", idle.ITLMs, 103.7855/9, 1e-9)
	near(t, "TTFT0", idle.TTFTMs, 20.1+103.7855/9, 1e-9)
	near(t, "S0", idle.ServiceTimeMs, 123.8855, 1e-9)
	zero, err := m.Solve(0)
	if err != nil {
		t.Fatal(err)
	}
	if zero != idle {
		t.Fatalf("Solve(0) = %+v, want Idle %+v", zero, idle)
	}
}

// TestLightLoadApproachesIdle: as lambda -> 0 the predicted TTFT and ITL
// converge to the idle ones, monotonically.
func TestLightLoadApproachesIdle(t *testing.T) {
	cases := []struct {
		name string
		p    Params
		w    Workload
		q    Queue
	}{
		{"example A", exampleA.p, exampleA.w, Queue{MaxBatch: 8, MaxQueue: 8}},
		{"defaults K=512", DefaultParams(), Workload{InputTokens: 1000, OutputTokens: 200}, Queue{MaxBatch: 256, MaxQueue: 256}},
		{"prefill only", DefaultParams(), Workload{InputTokens: 3000}, Queue{MaxBatch: 16, MaxQueue: 16}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := mustModel(t, tc.p, tc.w, tc.q)
			idle := m.Idle()
			prev := math.Inf(1)
			for _, frac := range []float64{1e-1, 1e-2, 1e-4, 1e-6, 1e-9} {
				got, err := m.Solve(frac * m.MaxServiceRatePerSecond())
				if err != nil {
					t.Fatal(err)
				}
				gap := math.Abs(got.TTFTMs-idle.TTFTMs)/idle.TTFTMs + math.Abs(got.ITLMs-idle.ITLMs)/max(idle.ITLMs, 1)
				if gap > prev {
					t.Fatalf("load %g: gap to idle %g grew from %g", frac, gap, prev)
				}
				prev = gap
			}
			if prev > 1e-6 {
				t.Fatalf("at load 1e-9 TTFT/ITL still %g from idle", prev)
			}
		})
	}
}

// TestSolveMonotoneInRate: TTFT and ITL grow with the rate (MaxRate's
// bisection relies on it), throughput never exceeds mu(N).
func TestSolveMonotoneInRate(t *testing.T) {
	m := mustModel(t, DefaultParams(), Workload{InputTokens: 1000, OutputTokens: 200}, Queue{MaxBatch: 256, MaxQueue: 256})
	top := m.MaxServiceRatePerSecond()
	prev := m.Idle()
	for frac := 0.01; frac <= 1.5; frac += 0.01 {
		got, err := m.Solve(frac * top)
		if err != nil {
			t.Fatal(err)
		}
		if got.TTFTMs < prev.TTFTMs*(1-1e-12) || got.ITLMs < prev.ITLMs*(1-1e-12) {
			t.Fatalf("load %.2f: TTFT %v / ITL %v fell below %v / %v", frac, got.TTFTMs, got.ITLMs, prev.TTFTMs, prev.ITLMs)
		}
		if got.ThroughputPerSecond > top*(1+1e-12) {
			t.Fatalf("load %.2f: X %v above mu(N) %v", frac, got.ThroughputPerSecond, top)
		}
		prev = got
	}
}

// TestSolveExtremeRates: huge and subnormal rates stay finite (log-space
// chain, flow-balance throughput).
func TestSolveExtremeRates(t *testing.T) {
	m := mustModel(t, DefaultParams(), Workload{InputTokens: 1000, OutputTokens: 200}, Queue{MaxBatch: 256, MaxQueue: 256})
	for _, rate := range []float64{math.SmallestNonzeroFloat64, 1e-300, 1e-30, 1e6, 1e300, math.MaxFloat64} {
		got, err := m.Solve(rate)
		if err != nil {
			t.Fatalf("rate %g: %v", rate, err)
		}
		if !got.finite() || got.TTFTMs <= 0 || got.ITLMs <= 0 || got.WaitTimeMs < 0 {
			t.Fatalf("rate %g: %+v", rate, got)
		}
		if got.ThroughputPerSecond > rate {
			t.Fatalf("rate %g: throughput %g above it", rate, got.ThroughputPerSecond)
		}
	}
	sat, _ := m.Solve(1e300)
	near(t, "saturated X", sat.ThroughputPerSecond, m.MaxServiceRatePerSecond(), 1e-9)
	near(t, "saturated L", sat.AvgInSystem, 512, 1e-9)
}

func TestModelErrors(t *testing.T) {
	good := DefaultParams()
	w := Workload{InputTokens: 10, OutputTokens: 10}
	q := Queue{MaxBatch: 4, MaxQueue: 4}
	tests := []struct {
		name   string
		p      Params
		w      Workload
		q      Queue
		target error
	}{
		{"bad params", Params{}, w, q, ErrInvalidParams},
		{"bad workload", good, Workload{InputTokens: -1}, q, ErrInvalidWorkload},
		{"zero batch", good, w, Queue{MaxQueue: 4}, ErrInvalidQueue},
		{"negative queue", good, w, Queue{MaxBatch: 4, MaxQueue: -1}, ErrInvalidQueue},
		{"huge batch", good, w, Queue{MaxBatch: LimitBatch + 1}, ErrInvalidQueue},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := NewModel(tc.p, tc.w, tc.q); !errors.Is(err, tc.target) {
				t.Fatalf("NewModel error %v, want %v", err, tc.target)
			}
		})
	}
	m := mustModel(t, good, w, q)
	for _, rate := range []float64{-1, math.NaN(), math.Inf(1)} {
		if _, err := m.Solve(rate); !errors.Is(err, ErrInvalidRate) {
			t.Fatalf("Solve(%v) error %v, want ErrInvalidRate", rate, err)
		}
	}
}
