package slo

import (
	"errors"
	"math"
	"testing"
)

// fuzzMaxStates keeps each fuzz input fast; larger chains are covered by
// the unit tests and the benchmark.
const fuzzMaxStates = 2048

// FuzzModel: for any inputs the model either rejects them with an error
// (out of its documented domain) or returns metrics that are finite and
// non-negative, with p(K) a probability, X <= min(lambda, mu(N)) and
// W = R - S; and MaxRate with the inferred targets either reports
// infeasibility or returns a rate in (0, mu(N)] that meets them. Each
// input is checked as given (mostly out-of-domain values: the rejection
// paths) and folded into the domain (the numerics).
func FuzzModel(f *testing.F) {
	f.Add(5.0, 0.05, 0.00005, 1000.0, 200.0, 256, 256, 3.0)
	f.Add(10.0, 0.1, 0.001, 100.0, 9.0, 2, 1, 10.0)
	f.Add(100.0, 0.0, 0.0, 0.0, 0.0, 1, 0, 1e-9)
	f.Add(0.5, 2.0, 0.3, 1e6, 1.0, 64, 1024, 1e300)
	f.Add(1e6, 1e6, 1e6, 1e7, 1e7, 8, 8, 5e-324)
	f.Fuzz(func(t *testing.T, alpha, beta, gamma, in, out float64, batch, queue int, rate float64) {
		raw := fuzzCase{
			p:    Params{Alpha: alpha, Beta: beta, Gamma: gamma},
			w:    Workload{InputTokens: in, OutputTokens: out},
			q:    Queue{MaxBatch: batch, MaxQueue: queue},
			rate: rate,
		}
		if batch >= 0 && queue >= 0 && batch+queue <= fuzzMaxStates {
			raw.check(t)
		}
		folded := fuzzCase{
			p:    Params{Alpha: fold(alpha, 1e-3, 1e4), Beta: fold(beta, 0, 10), Gamma: fold(gamma, 0, 1)},
			w:    Workload{InputTokens: fold(in, 0, 1e5), OutputTokens: fold(out, 0, 1e4)},
			q:    Queue{MaxBatch: 1 + abs(batch)%512, MaxQueue: abs(queue) % 1024},
			rate: fold(rate, 0, 1e6),
		}
		if folded.w.OutputTokens < 1 {
			folded.w.OutputTokens = 0
		}
		folded.check(t)
	})
}

// fuzzCase is one input of FuzzModel.
type fuzzCase struct {
	p    Params
	w    Workload
	q    Queue
	rate float64
}

// check runs the model on c and asserts its contract.
func (c fuzzCase) check(t *testing.T) {
	t.Helper()
	m, err := NewModel(c.p, c.w, c.q)
	if err != nil {
		if c.p.Validate() == nil && c.w.Validate() == nil && c.q.Validate() == nil {
			t.Fatalf("NewModel rejected valid inputs %+v: %v", c, err)
		}
		return
	}
	mt, err := m.Solve(c.rate)
	if err != nil {
		if errors.Is(err, ErrInvalidRate) && !within(c.rate, 0, math.MaxFloat64) {
			return
		}
		t.Fatalf("Solve on %+v: %v", c, err)
	}
	checkMetrics(t, m, mt)

	targets, err := InferTargets(c.p, c.w, DefaultSLOMultiplier)
	if err != nil {
		t.Fatalf("InferTargets on valid inputs %+v: %v", c, err)
	}
	lambda, err := m.MaxRate(targets)
	if errors.Is(err, ErrInfeasible) {
		return
	}
	if err != nil {
		t.Fatalf("MaxRate(%+v) on %+v: %v", targets, c, err)
	}
	if lambda <= 0 || lambda > m.MaxServiceRatePerSecond() {
		t.Fatalf("lambda* %v outside (0, %v] on %+v", lambda, m.MaxServiceRatePerSecond(), c)
	}
	at, err := m.Solve(lambda)
	if err != nil || at.TTFTMs > targets.TTFTMs || at.ITLMs > targets.ITLMs {
		t.Fatalf("at lambda* %v: %+v, %v misses %+v on %+v", lambda, at, err, targets, c)
	}
}

// fold maps any float into [lo, hi] (NaN and infinities to lo).
func fold(x, lo, hi float64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return lo
	}
	return lo + math.Mod(math.Abs(x), hi-lo)
}

// abs is |n| without overflow for the smallest int.
func abs(n int) int {
	if n < 0 {
		return -(n + 1)
	}
	return n
}

// checkMetrics asserts the invariants of a solution.
func checkMetrics(t *testing.T, m *Model, mt Metrics) {
	t.Helper()
	if !mt.finite() {
		t.Fatalf("non-finite metrics %+v", mt)
	}
	for name, v := range map[string]float64{
		"lambda": mt.ArrivalRatePerSecond, "X": mt.ThroughputPerSecond, "p(K)": mt.BlockingProbability,
		"L": mt.AvgInSystem, "nbar": mt.AvgBatch, "R": mt.ResponseTimeMs, "S": mt.ServiceTimeMs,
		"W": mt.WaitTimeMs, "Tp": mt.PrefillTimeMs, "ITL": mt.ITLMs, "TTFT": mt.TTFTMs,
	} {
		if v < 0 {
			t.Fatalf("%s = %v < 0 in %+v", name, v, mt)
		}
	}
	if mt.BlockingProbability > 1 {
		t.Fatalf("p(K) = %v > 1", mt.BlockingProbability)
	}
	const slack = 1 + 1e-9
	if mt.ThroughputPerSecond > mt.ArrivalRatePerSecond*slack || mt.ThroughputPerSecond > m.MaxServiceRatePerSecond()*slack {
		t.Fatalf("X %v above lambda %v or mu(N) %v", mt.ThroughputPerSecond, mt.ArrivalRatePerSecond, m.MaxServiceRatePerSecond())
	}
	if mt.AvgBatch > float64(m.Queue().MaxBatch)*slack || mt.AvgInSystem > float64(m.Queue().States())*slack {
		t.Fatalf("nbar %v or L %v above its limit", mt.AvgBatch, mt.AvgInSystem)
	}
	if d := mt.ResponseTimeMs - mt.ServiceTimeMs - mt.WaitTimeMs; d > 1e-9*mt.ResponseTimeMs || d < -1e-9*mt.ResponseTimeMs {
		t.Fatalf("W %v != R %v - S %v", mt.WaitTimeMs, mt.ResponseTimeMs, mt.ServiceTimeMs)
	}
}
