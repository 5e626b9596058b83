package slo

import (
	"fmt"
	"math"
)

// DefaultSLOMultiplier is the spec's default k for inferred targets: a
// target k times the idle iteration time, i.e. a target utilisation of
// about 1 - 1/k = 0.67.
const DefaultSLOMultiplier = 3.0

// rateTolerance is MaxRate's relative tolerance: the binary search stops
// when the feasible and infeasible rates are within rateTolerance x the
// infeasible one, and returns the feasible end. The result therefore meets
// the targets and is at least (1 - 1e-6) lambda*.
const rateTolerance = 1e-6

// maxBisections bounds MaxRate's search (halving a float64 interval more
// than ~1100 times cannot change it; 200 halvings reach 2^-200 x mu(N)).
const maxBisections = 200

// Targets are the latency objectives a replica is sized for.
type Targets struct {
	// TTFTMs is the target mean time to first token (ms).
	TTFTMs float64 `json:"ttftMs"`
	// ITLMs is the target mean inter-token latency (ms).
	ITLMs float64 `json:"itlMs"`
}

// Validate reports whether both targets are positive and finite.
func (t Targets) Validate() error {
	if t.TTFTMs <= 0 || !finite(t.TTFTMs) {
		return fmt.Errorf("%w: TTFT %v ms must be positive and finite", ErrInvalidTargets, t.TTFTMs)
	}
	if t.ITLMs <= 0 || !finite(t.ITLMs) {
		return fmt.Errorf("%w: ITL %v ms must be positive and finite", ErrInvalidTargets, t.ITLMs)
	}
	return nil
}

// met reports whether the metrics meet the targets.
func (t Targets) met(mt Metrics) bool {
	return mt.TTFTMs <= t.TTFTMs && mt.ITLMs <= t.ITLMs
}

// InferTargets derives targets from the parameters when none are
// configured (spec): TTFT = k alpha + (beta+gamma) i and
// ITL = k alpha + beta + gamma (i + (o+1)/2), with k the SLO multiplier
// (> 1; DefaultSLOMultiplier when unset).
func InferTargets(p Params, w Workload, k float64) (Targets, error) {
	if err := p.Validate(); err != nil {
		return Targets{}, fmt.Errorf("infer targets: %w", err)
	}
	if err := w.Validate(); err != nil {
		return Targets{}, fmt.Errorf("infer targets: %w", err)
	}
	if k <= 1 || !finite(k) {
		return Targets{}, fmt.Errorf("infer targets: %w: slo multiplier %v must be > 1 and finite", ErrInvalidConfig, k)
	}
	i, o := w.InputTokens, w.OutputTokens
	return Targets{
		TTFTMs: k*p.Alpha + (p.Beta+p.Gamma)*i,
		ITLMs:  k*p.Alpha + p.Beta + p.Gamma*(i+(o+1)/2),
	}, nil
}

// MaxRate returns lambda*, the largest arrival rate (requests per second)
// at which the replica meets both targets, searched by bisection over
// (0, mu(N)]: mu(N) is the most a replica can complete, beyond it requests
// are turned away. The search assumes TTFT and ITL grow with the rate; it
// returns the feasible end of the last interval, within rateTolerance
// (relative 1e-6) of lambda*. It returns ErrInfeasible when even an idle
// replica misses a target (then no replica count helps).
func (m *Model) MaxRate(t Targets) (float64, error) {
	if err := t.Validate(); err != nil {
		return 0, fmt.Errorf("max rate: %w", err)
	}
	if idle := m.Idle(); !t.met(idle) {
		return 0, fmt.Errorf("max rate: %w: idle TTFT %.4g ms / ITL %.4g ms exceed targets %.4g ms / %.4g ms",
			ErrInfeasible, idle.TTFTMs, idle.ITLMs, t.TTFTMs, t.ITLMs)
	}
	feasible := func(ratePerSecond float64) (bool, error) {
		mt, err := m.Solve(ratePerSecond)
		if err != nil {
			return false, fmt.Errorf("max rate: %w", err)
		}
		return t.met(mt), nil
	}
	lo, hi := 0.0, m.MaxServiceRatePerSecond()
	ok, err := feasible(hi)
	if err != nil || ok {
		return hi, err
	}
	for range maxBisections {
		if hi-lo <= rateTolerance*hi {
			break
		}
		mid := lo + (hi-lo)/2
		ok, err := feasible(mid)
		if err != nil {
			return 0, err
		}
		if ok {
			lo = mid
		} else {
			hi = mid
		}
	}
	if lo == 0 {
		return 0, fmt.Errorf("max rate: %w: targets met only below %.3g requests/s", ErrInfeasible, hi)
	}
	return lo, nil
}

// integerSlack absorbs float rounding in Replicas: a ratio within a
// relative 1e-9 of a positive integer counts as that integer (1.1/0.1 is
// 11.000000000000002); any positive demand needs at least one replica.
const integerSlack = 1e-9

// Replicas returns ceil(totalRatePerSecond / maxRatePerSecond), the
// replicas needed to serve the total arrival rate at lambda* each.
func Replicas(totalRatePerSecond, maxRatePerSecond float64) (int, error) {
	if !within(totalRatePerSecond, 0, math.MaxFloat64) {
		return 0, fmt.Errorf("replicas: %w: total %v requests/s", ErrInvalidRate, totalRatePerSecond)
	}
	if maxRatePerSecond <= 0 || !finite(maxRatePerSecond) {
		return 0, fmt.Errorf("replicas: %w: per-replica max %v requests/s must be positive", ErrInvalidRate, maxRatePerSecond)
	}
	ratio := totalRatePerSecond / maxRatePerSecond
	if ratio > math.MaxInt32 {
		return 0, fmt.Errorf("replicas: %w: %v requests/s needs more than %d replicas", ErrInvalidRate, totalRatePerSecond, math.MaxInt32)
	}
	if n := math.Round(ratio); n >= 1 && math.Abs(ratio-n) <= integerSlack*n {
		return int(n), nil
	}
	return int(math.Ceil(ratio)), nil
}
