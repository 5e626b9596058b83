package slo

import (
	"fmt"
	"math"
)

// Domain limits. Inside them every quantity the model computes is finite
// (the largest service time is below 1e26 ms); outside them the
// constructors return an error instead of risking an overflow.
const (
	// LimitParamMs bounds alpha, beta and gamma (milliseconds).
	LimitParamMs = 1e6
	// LimitTokens bounds the average input and output tokens per request.
	LimitTokens = 1e7
	// LimitBatch bounds the maximum batch size N.
	LimitBatch = 1 << 16
	// LimitQueue bounds the maximum queue length.
	LimitQueue = 1 << 20
	// LimitRatePerSecond bounds an observed replica arrival rate (the
	// model itself accepts any finite rate).
	LimitRatePerSecond = 1e12
)

// Default parameters, used when nothing has been learned and no light-load
// observation is available (spec: alpha 5 ms, beta 0.05, gamma 0.00005).
const (
	DefaultAlphaMs = 5.0
	DefaultBetaMs  = 0.05
	DefaultGammaMs = 0.00005
)

// Params are a variant's performance parameters, all in milliseconds.
type Params struct {
	// Alpha is the fixed time of one engine iteration (ms per iteration).
	Alpha float64 `json:"alpha"`
	// Beta is the compute time per token (ms per token).
	Beta float64 `json:"beta"`
	// Gamma is the KV-cache access time per token held (ms per token).
	Gamma float64 `json:"gamma"`
}

// DefaultParams returns the spec's cold-start parameters.
func DefaultParams() Params {
	return Params{Alpha: DefaultAlphaMs, Beta: DefaultBetaMs, Gamma: DefaultGammaMs}
}

// Validate reports whether the parameters are in the model's domain:
// alpha in (0, LimitParamMs], beta and gamma in [0, LimitParamMs]. Alpha
// must be positive so that every service rate is finite.
func (p Params) Validate() error {
	if p.Alpha <= 0 || !within(p.Alpha, 0, LimitParamMs) {
		return fmt.Errorf("%w: alpha %v ms not in (0, %v]", ErrInvalidParams, p.Alpha, LimitParamMs)
	}
	if !within(p.Beta, 0, LimitParamMs) {
		return fmt.Errorf("%w: beta %v ms not in [0, %v]", ErrInvalidParams, p.Beta, LimitParamMs)
	}
	if !within(p.Gamma, 0, LimitParamMs) {
		return fmt.Errorf("%w: gamma %v ms not in [0, %v]", ErrInvalidParams, p.Gamma, LimitParamMs)
	}
	return nil
}

// Workload is the average request size the model is evaluated for.
type Workload struct {
	// InputTokens is the average prompt length i (tokens).
	InputTokens float64 `json:"inputTokens"`
	// OutputTokens is the average generated length o (tokens). 0 means a
	// prefill-only workload (no decode, ITL 0); otherwise it must be at
	// least 1, since a decoding request generates at least one token and
	// the ITL divides the decode time by o.
	OutputTokens float64 `json:"outputTokens"`
}

// Validate reports whether the workload is in the model's domain:
// i in [0, LimitTokens], o = 0 or o in [1, LimitTokens].
func (w Workload) Validate() error {
	if !within(w.InputTokens, 0, LimitTokens) {
		return fmt.Errorf("%w: input tokens %v not in [0, %v]", ErrInvalidWorkload, w.InputTokens, LimitTokens)
	}
	if w.OutputTokens != 0 && !within(w.OutputTokens, 1, LimitTokens) {
		return fmt.Errorf("%w: output tokens %v neither 0 nor in [1, %v]", ErrInvalidWorkload, w.OutputTokens, LimitTokens)
	}
	return nil
}

// perRequestMs is the time one request adds to every iteration it takes
// part in: beta (i+o)/(o+1) + gamma (i + o/2).
func (p Params) perRequestMs(w Workload) float64 {
	i, o := w.InputTokens, w.OutputTokens
	return p.Beta*(i+o)/(o+1) + p.Gamma*(i+o/2)
}

// IterationTimeMs is T(n) = alpha + n (beta (i+o)/(o+1) + gamma (i + o/2)),
// the time of one engine iteration with n requests in the batch (n may be
// fractional: the mean batch size).
func (p Params) IterationTimeMs(w Workload, n float64) float64 {
	return p.Alpha + n*p.perRequestMs(w)
}

// PrefillTimeMs is Tp(n) = T(n) + (beta+gamma) i, a request's prefill
// time in a batch of n.
func (p Params) PrefillTimeMs(w Workload, n float64) float64 {
	return p.IterationTimeMs(w, n) + (p.Beta+p.Gamma)*w.InputTokens
}

// DecodeStepTimeMs is Td(n) = T(n) + beta + gamma (i + o/2), the time of
// one decode step in a batch of n.
func (p Params) DecodeStepTimeMs(w Workload, n float64) float64 {
	return p.IterationTimeMs(w, n) + p.Beta + p.Gamma*(w.InputTokens+w.OutputTokens/2)
}

// ServiceTimeMs is Tp(n) + o Td(n), a request's whole time in service in a
// batch of n: its prefill and its o decode steps.
func (p Params) ServiceTimeMs(w Workload, n float64) float64 {
	return p.PrefillTimeMs(w, n) + w.OutputTokens*p.DecodeStepTimeMs(w, n)
}

// ServiceRatePerMs is mu(n) = n / (Tp(n) + o Td(n)), the rate at which a
// batch of n completes requests, in requests per millisecond (the chain's
// unit). It is 0 for n <= 0.
func (p Params) ServiceRatePerMs(w Workload, n float64) float64 {
	if n <= 0 {
		return 0
	}
	return n / p.ServiceTimeMs(w, n)
}

// ServiceRatePerSecond is mu(n) in requests per second (1000 x
// ServiceRatePerMs).
func (p Params) ServiceRatePerSecond(w Workload, n float64) float64 {
	return msPerSecond * p.ServiceRatePerMs(w, n)
}

// msPerSecond converts a per-millisecond rate to per second.
const msPerSecond = 1000.0

// finite reports whether x is neither NaN nor infinite.
func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// within reports whether lo <= x <= hi; it is false for NaN.
func within(x, lo, hi float64) bool { return x >= lo && x <= hi }
