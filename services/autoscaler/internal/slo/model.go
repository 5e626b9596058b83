package slo

import (
	"fmt"
	"math"
)

// Metrics are the queueing model's predictions at one arrival rate.
type Metrics struct {
	// ArrivalRatePerSecond is lambda, requests per second.
	ArrivalRatePerSecond float64
	// ThroughputPerSecond is X = lambda (1 - p(K)), requests per second.
	ThroughputPerSecond float64
	// BlockingProbability is p(K), the share of arrivals that find the
	// replica full.
	BlockingProbability float64
	// AvgInSystem is L = sum n p(n), requests waiting or in service.
	AvgInSystem float64
	// AvgBatch is nbar = sum min(n, N) p(n), the mean number of requests
	// in service (busy servers, counting idle time as 0).
	AvgBatch float64
	// ResponseTimeMs is R = L / X.
	ResponseTimeMs float64
	// ServiceTimeMs is S = nbar / X, the mean time in service.
	ServiceTimeMs float64
	// WaitTimeMs is W = R - S, the mean time queued before service.
	WaitTimeMs float64
	// PrefillTimeMs is Tp(nbar).
	PrefillTimeMs float64
	// ITLMs is (S - Tp(nbar)) / o, the mean inter-token latency (0 for a
	// prefill-only workload).
	ITLMs float64
	// TTFTMs is W + Tp(nbar) + ITL, the mean time to first token. For a
	// prefill-only workload (o = 0) it is W + S = R: the request's only
	// token comes when its service ends.
	TTFTMs float64
}

// Model is the queueing model of one replica: fixed parameters, workload
// and limits, solved for any arrival rate. The per-state service rates are
// computed once, so solving many rates (MaxRate's binary search) costs
// O(K) each without allocating. A Model is not safe for concurrent use:
// Solve writes a scratch buffer.
type Model struct {
	params Params
	work   Workload
	queue  Queue
	// mu[m] is mu(m) in requests per millisecond, m = 1..N (mu[0] = 0).
	mu []float64
	// logMu[m] = log(mu[m]).
	logMu []float64
	// p holds the state probabilities p(0..K) of the last Solve.
	p []float64
}

// NewModel validates its inputs and builds the model.
func NewModel(p Params, w Workload, q Queue) (*Model, error) {
	m := &Model{}
	if err := m.reset(p, w, q); err != nil {
		return nil, err
	}
	return m, nil
}

// reset re-parameterises m, reusing its buffers when they are big enough
// (the tuner's numerical Jacobian solves the same queue seven times).
func (m *Model) reset(p Params, w Workload, q Queue) error {
	if err := p.Validate(); err != nil {
		return fmt.Errorf("build queueing model: %w", err)
	}
	if err := w.Validate(); err != nil {
		return fmt.Errorf("build queueing model: %w", err)
	}
	if err := q.Validate(); err != nil {
		return fmt.Errorf("build queueing model: %w", err)
	}
	m.params, m.work, m.queue = p, w, q
	m.mu = grow(m.mu, q.MaxBatch+1)
	m.logMu = grow(m.logMu, q.MaxBatch+1)
	m.p = grow(m.p, q.States()+1)
	m.mu[0], m.logMu[0] = 0, math.Inf(-1)
	for n := 1; n <= q.MaxBatch; n++ {
		m.mu[n] = p.ServiceRatePerMs(w, float64(n))
		m.logMu[n] = math.Log(m.mu[n])
	}
	return nil
}

// grow returns s resized to n elements, reallocating only when needed.
func grow(s []float64, n int) []float64 {
	if cap(s) >= n {
		return s[:n]
	}
	return make([]float64, n)
}

// Params returns the model's parameters.
func (m *Model) Params() Params { return m.params }

// Workload returns the model's workload.
func (m *Model) Workload() Workload { return m.work }

// Queue returns the model's limits.
func (m *Model) Queue() Queue { return m.queue }

// MaxServiceRatePerSecond is mu(N), the most requests per second a full
// batch completes: no arrival rate gives a higher throughput.
func (m *Model) MaxServiceRatePerSecond() float64 {
	return msPerSecond * m.mu[m.queue.MaxBatch]
}

// Idle returns the metrics in the limit lambda -> 0: nothing waits
// (W = 0), the batch is empty (nbar = 0, so Tp(nbar) = Tp(0)) and a lone
// request is served at mu(1), so S = R = 1/mu(1) = Tp(1) + o Td(1). Then
// ITL = (Tp(1) + o Td(1) - Tp(0)) / o and TTFT = Tp(0) + ITL.
func (m *Model) Idle() Metrics {
	service := m.params.ServiceTimeMs(m.work, 1)
	prefill := m.params.PrefillTimeMs(m.work, 0)
	out := Metrics{
		ResponseTimeMs: service,
		ServiceTimeMs:  service,
		PrefillTimeMs:  prefill,
		TTFTMs:         service,
	}
	if o := m.work.OutputTokens; o > 0 {
		out.ITLMs = max(0, (service-prefill)/o)
		out.TTFTMs = prefill + out.ITLMs
	}
	return out
}

// tinyLoad is the load lambda/mu(1) below which Solve returns
// lightLimit: p(1) ~ lambda/mu(1) < 2^-60 and every metric differs from its
// lambda -> 0 limit by less than float64 resolution. It also keeps the
// chain away from subnormal rates, where math.Log is inexact.
const tinyLoad = 0x1p-60

// lightLimit returns the metrics for a rate with load below tinyLoad: the
// idle metrics, with X = lambda (p(K) rounds to 0) and L = nbar =
// lambda/mu(1) (p(1) is all the mass away from state 0).
func (m *Model) lightLimit(ratePerSecond float64) Metrics {
	out := m.Idle()
	out.ArrivalRatePerSecond = ratePerSecond
	out.ThroughputPerSecond = ratePerSecond
	out.AvgBatch = ratePerSecond / msPerSecond / m.mu[1]
	out.AvgInSystem = out.AvgBatch
	return out
}

// Solve returns the metrics at ratePerSecond requests per second.
//
// The chain is p(n+1) = p(n) lambda / mu(min(n+1, N)) for n < K,
// normalised. It is built in log space (log p(n) is a running sum of
// log lambda - log mu) and exponentiated after subtracting the largest
// log, so neither underflow nor overflow occurs for any K in the domain.
// X is computed as sum_{n>=1} p(n) mu(min(n, N)), which equals
// lambda (1 - p(K)) by detailed balance but does not cancel when p(K) is
// close to 1; W is computed from the mean queue length
// sum (n - min(n, N)) p(n), which equals (R - S) X without the
// subtraction. A rate of 0 returns Idle, and one with lambda/mu(1) below
// 2^-60 its first-order limit (lightLimit).
func (m *Model) Solve(ratePerSecond float64) (Metrics, error) {
	if !within(ratePerSecond, 0, math.MaxFloat64) {
		return Metrics{}, fmt.Errorf("solve queueing model: %w: %v requests/s", ErrInvalidRate, ratePerSecond)
	}
	lambda := ratePerSecond / msPerSecond
	if lambda/m.mu[1] < tinyLoad {
		return m.lightLimit(ratePerSecond), nil
	}
	k, n := m.queue.States(), m.queue.MaxBatch
	p := m.p
	logLambda := math.Log(lambda)
	p[0] = 0
	top := 0.0
	for s := 1; s <= k; s++ {
		p[s] = p[s-1] + logLambda - m.logMu[min(s, n)]
		top = max(top, p[s])
	}
	var z float64
	for s := range p {
		p[s] = math.Exp(p[s] - top)
		z += p[s]
	}
	var inSystem, inService, queued, xPerMs float64
	for s := range p {
		p[s] /= z
		busy := min(s, n)
		inSystem += float64(s) * p[s]
		inService += float64(busy) * p[s]
		queued += float64(s-busy) * p[s]
		xPerMs += p[s] * m.mu[busy]
	}
	if xPerMs <= 0 || inService == 0 {
		// Defensive: p(n >= 1) underflowed (tinyLoad should prevent it).
		return m.lightLimit(ratePerSecond), nil
	}
	out := Metrics{
		ArrivalRatePerSecond: ratePerSecond,
		ThroughputPerSecond:  xPerMs * msPerSecond,
		BlockingProbability:  p[k],
		AvgInSystem:          inSystem,
		AvgBatch:             inService,
		ResponseTimeMs:       inSystem / xPerMs,
		ServiceTimeMs:        inService / xPerMs,
		WaitTimeMs:           queued / xPerMs,
		PrefillTimeMs:        m.params.PrefillTimeMs(m.work, inService),
	}
	out.TTFTMs = out.WaitTimeMs + out.ServiceTimeMs
	if o := m.work.OutputTokens; o > 0 {
		out.ITLMs = max(0, (out.ServiceTimeMs-out.PrefillTimeMs)/o)
		out.TTFTMs = out.WaitTimeMs + out.PrefillTimeMs + out.ITLMs
	}
	if !out.finite() {
		return Metrics{}, fmt.Errorf("solve queueing model at %v requests/s: non-finite result %+v", ratePerSecond, out)
	}
	return out, nil
}

// finite reports whether every field is finite.
func (mt Metrics) finite() bool {
	for _, v := range [...]float64{
		mt.ArrivalRatePerSecond, mt.ThroughputPerSecond, mt.BlockingProbability,
		mt.AvgInSystem, mt.AvgBatch, mt.ResponseTimeMs, mt.ServiceTimeMs,
		mt.WaitTimeMs, mt.PrefillTimeMs, mt.ITLMs, mt.TTFTMs,
	} {
		if !finite(v) {
			return false
		}
	}
	return true
}
