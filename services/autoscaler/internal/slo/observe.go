package slo

import (
	"fmt"

	"github.com/hermod/hermod/services/autoscaler/internal/scaling"
)

// lightLoadMaxRunning is the most running requests a replica may report,
// with an empty queue over the last minute, for its latencies to count as
// light-load ones (batch of about one, no waiting).
const lightLoadMaxRunning = 1

// initialAlphaShare is the spec's light-load guess alpha = 0.9 ITL: at a
// batch of one, an iteration is mostly its fixed cost.
const initialAlphaShare = 0.9

// Observation is one replica's environment snapshot: what it was offered
// and the latencies it delivered, the tuner's measurement.
type Observation struct {
	// ArrivalRatePerSecond is the requests per second routed to the
	// replica.
	ArrivalRatePerSecond float64 `json:"arrivalRatePerSecond"`
	// Workload is the replica's average input and output tokens.
	Workload Workload `json:"workload"`
	// Queue is the replica's batch and queue limits.
	Queue Queue `json:"queue"`
	// TTFTMs and ITLMs are the observed mean latencies (ms).
	TTFTMs float64 `json:"ttftMs"`
	ITLMs  float64 `json:"itlMs"`
	// LightLoad marks a snapshot taken with an empty queue and at most one
	// running request, usable for the initial guess.
	LightLoad bool `json:"lightLoad"`
}

// validateForTuning checks what the filter needs: a finite rate, a valid
// workload that decodes (o >= 1, so ITL is defined), valid limits and
// positive finite latencies (the measurement noise is proportional to
// them).
func (o Observation) validateForTuning() error {
	if err := o.Workload.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidObservation, err)
	}
	if o.Workload.OutputTokens < 1 {
		return fmt.Errorf("%w: output tokens %v: a prefill-only snapshot has no ITL", ErrInvalidObservation, o.Workload.OutputTokens)
	}
	if err := o.Queue.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidObservation, err)
	}
	if !within(o.ArrivalRatePerSecond, 0, LimitRatePerSecond) {
		return fmt.Errorf("%w: arrival rate %v requests/s", ErrInvalidObservation, o.ArrivalRatePerSecond)
	}
	if o.TTFTMs <= 0 || !finite(o.TTFTMs) || o.ITLMs <= 0 || !finite(o.ITLMs) {
		return fmt.Errorf("%w: TTFT %v ms and ITL %v ms must be positive and finite", ErrInvalidObservation, o.TTFTMs, o.ITLMs)
	}
	return nil
}

// Observations returns the tuner's snapshots for a variant: one per ready
// replica that serves both prefill and decode (the model describes such a
// replica) and has completed requests (positive TTFT and ITL, at least one
// output token on average). The limits come from cfg.Queue(v).
func Observations(v *scaling.Variant, cfg Config) []Observation {
	if v == nil {
		return nil
	}
	q := cfg.Queue(v)
	var out []Observation
	for _, r := range v.Replicas {
		o := Observation{
			ArrivalRatePerSecond: r.ArrivalRate,
			Workload:             Workload{InputTokens: r.AvgInputTokens, OutputTokens: r.AvgOutputTokens},
			Queue:                q,
			TTFTMs:               r.AvgTTFT,
			ITLMs:                r.AvgITL,
			LightLoad:            r.Queue == 0 && r.Running <= lightLoadMaxRunning,
		}
		if r.Role != scaling.RoleBoth || o.validateForTuning() != nil {
			continue
		}
		out = append(out, o)
	}
	return out
}

// ParamsFromLightLoad derives a first guess from a light-load observation.
//
// alpha = 0.9 ITL (spec). The model's idle ITL (Model.Idle) is
// alpha + beta a + gamma b with a = 1 + f (1 + 1/o), b = g (2 + 1/o),
// f = (i+o)/(o+1) and g = i + o/2, so the remaining 0.1 ITL is the
// per-token part. It is split between beta and gamma in the ratio of the
// defaults (gamma/beta = 0.00005/0.05 = 1/1000): beta = s 0.05,
// gamma = s 0.00005 with s = 0.1 ITL / (0.05 a + 0.00005 b), so the guess
// reproduces the observed ITL exactly at idle.
//
// Why not also solve for the split from TTFT: the tuner's bounds are
// 0.01x..100x of this guess, and a 2x2 solve from one noisy snapshot can
// put beta or gamma near zero and lock the filter's range around a wrong
// value; a fixed ratio keeps both at a plausible magnitude and the filter
// learns the split.
func ParamsFromLightLoad(o Observation) (Params, error) {
	if err := o.validateForTuning(); err != nil {
		return Params{}, fmt.Errorf("params from light load: %w", err)
	}
	i, out := o.Workload.InputTokens, o.Workload.OutputTokens
	f := (i + out) / (out + 1)
	g := i + out/2
	a := 1 + f*(1+1/out)
	b := g * (2 + 1/out)
	alpha := initialAlphaShare * o.ITLMs
	s := (1 - initialAlphaShare) * o.ITLMs / (DefaultBetaMs*a + DefaultGammaMs*b)
	p := Params{Alpha: alpha, Beta: s * DefaultBetaMs, Gamma: s * DefaultGammaMs}
	if err := validInitial(p); err != nil {
		return Params{}, fmt.Errorf("params from light load: ITL %v ms: %w", o.ITLMs, err)
	}
	return p, nil
}

// InitialParams returns the tuner's first guess: from the light-load
// observation with the lowest arrival rate when there is one (and it
// yields valid parameters), else DefaultParams.
func InitialParams(obs []Observation) Params {
	best := -1
	for k, o := range obs {
		if !o.LightLoad || o.validateForTuning() != nil {
			continue
		}
		if best < 0 || o.ArrivalRatePerSecond < obs[best].ArrivalRatePerSecond {
			best = k
		}
	}
	if best >= 0 {
		if p, err := ParamsFromLightLoad(obs[best]); err == nil {
			return p
		}
	}
	return DefaultParams()
}
