package slo

import "testing"

// BenchmarkMaxRate is the analyzer's hot path: lambda* by bisection on a
// K = 512 chain (vLLM's default 256 sequences plus an equal queue), with
// the inferred targets.
func BenchmarkMaxRate(b *testing.B) {
	m := mustModel(b, DefaultParams(), defaultWorkload, Queue{MaxBatch: 256, MaxQueue: 256})
	targets, err := InferTargets(DefaultParams(), defaultWorkload, DefaultSLOMultiplier)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.MaxRate(targets); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSolve is one evaluation of the K = 512 chain.
func BenchmarkSolve(b *testing.B) {
	m := mustModel(b, DefaultParams(), defaultWorkload, Queue{MaxBatch: 256, MaxQueue: 256})
	rate := 0.7 * m.MaxServiceRatePerSecond()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.Solve(rate); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTunerUpdate is one EKF step (seven chain solves) on K = 128.
func BenchmarkTunerUpdate(b *testing.B) {
	q := Queue{MaxBatch: 64, MaxQueue: 64}
	m := mustModel(b, DefaultParams(), defaultWorkload, q)
	rate := 0.5 * m.MaxServiceRatePerSecond()
	mt, err := m.Solve(rate)
	if err != nil {
		b.Fatal(err)
	}
	o := Observation{ArrivalRatePerSecond: rate, Workload: defaultWorkload, Queue: q, TTFTMs: mt.TTFTMs, ITLMs: mt.ITLMs}
	tu, err := NewTuner(DefaultParams())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tu.Update(o); err != nil {
			b.Fatal(err)
		}
	}
}
