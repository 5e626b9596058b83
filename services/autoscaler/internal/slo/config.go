package slo

import (
	"fmt"

	"github.com/hermod/hermod/services/autoscaler/internal/scaling"
)

// DefaultMaxNumSeqs is vLLM's default max_num_seqs, the batch limit N when
// a variant does not set MaxNumSeqs.
const DefaultMaxNumSeqs = 256

// Config is the SLO analyzer's configuration for one model: the "default"
// entry or a per-model override of wva-queueing-model-config. It is a
// plain struct; the config package decodes YAML into it. Zero values mean
// "unset" and take the defaults described on each field.
type Config struct {
	// TargetTTFT is the explicit target mean TTFT in milliseconds; 0 infers
	// it from the parameters (InferTargets).
	TargetTTFT float64 `json:"targetTTFT,omitempty" yaml:"targetTTFT,omitempty"`
	// TargetITL is the explicit target mean ITL in milliseconds; 0 infers
	// it.
	TargetITL float64 `json:"targetITL,omitempty" yaml:"targetITL,omitempty"`
	// SLOMultiplier is k for inferred targets (> 1); 0 means
	// DefaultSLOMultiplier.
	SLOMultiplier float64 `json:"sloMultiplier,omitempty" yaml:"sloMultiplier,omitempty"`
	// TuningEnabled turns on the online parameter tuner. Analyze only reads
	// parameters; the owner of the Tuners checks this flag before feeding
	// them observations (when off, persisted or default parameters stay).
	TuningEnabled bool `json:"tuningEnabled,omitempty" yaml:"tuningEnabled,omitempty"`
	// MaxQueueSize is the queue part of the chain's capacity
	// K = N + MaxQueueSize; 0 means N (so K = 2N, 512 for vLLM's default
	// max_num_seqs of 256).
	MaxQueueSize int `json:"maxQueueSize,omitempty" yaml:"maxQueueSize,omitempty"`
}

// Validate reports whether every set field is in its domain.
func (c Config) Validate() error {
	if c.TargetTTFT < 0 || !finite(c.TargetTTFT) {
		return fmt.Errorf("%w: targetTTFT %v ms must be >= 0 and finite", ErrInvalidConfig, c.TargetTTFT)
	}
	if c.TargetITL < 0 || !finite(c.TargetITL) {
		return fmt.Errorf("%w: targetITL %v ms must be >= 0 and finite", ErrInvalidConfig, c.TargetITL)
	}
	if c.SLOMultiplier != 0 && (c.SLOMultiplier <= 1 || !finite(c.SLOMultiplier)) {
		return fmt.Errorf("%w: sloMultiplier %v must be > 1 (target utilisation 1 - 1/k)", ErrInvalidConfig, c.SLOMultiplier)
	}
	if c.MaxQueueSize < 0 || c.MaxQueueSize > LimitQueue {
		return fmt.Errorf("%w: maxQueueSize %d not in [0, %d]", ErrInvalidConfig, c.MaxQueueSize, LimitQueue)
	}
	return nil
}

// Multiplier returns k: SLOMultiplier, or DefaultSLOMultiplier when unset.
func (c Config) Multiplier() float64 {
	if c.SLOMultiplier == 0 {
		return DefaultSLOMultiplier
	}
	return c.SLOMultiplier
}

// Targets returns the targets for a variant with parameters p serving w:
// each explicit target where set, the inferred one (InferTargets with
// Multiplier) otherwise.
func (c Config) Targets(p Params, w Workload) (Targets, error) {
	if err := c.Validate(); err != nil {
		return Targets{}, fmt.Errorf("slo targets: %w", err)
	}
	t := Targets{TTFTMs: c.TargetTTFT, ITLMs: c.TargetITL}
	if t.TTFTMs > 0 && t.ITLMs > 0 {
		return t, nil
	}
	inferred, err := InferTargets(p, w, c.Multiplier())
	if err != nil {
		return Targets{}, fmt.Errorf("slo targets: %w", err)
	}
	if t.TTFTMs == 0 {
		t.TTFTMs = inferred.TTFTMs
	}
	if t.ITLMs == 0 {
		t.ITLMs = inferred.ITLMs
	}
	return t, nil
}

// Queue returns the chain limits for a variant: N = MaxNumSeqs (or
// DefaultMaxNumSeqs) and MaxQueueSize (or N).
func (c Config) Queue(v *scaling.Variant) Queue {
	n := DefaultMaxNumSeqs
	if v != nil && v.MaxNumSeqs > 0 {
		n = v.MaxNumSeqs
	}
	q := c.MaxQueueSize
	if q == 0 {
		q = n
	}
	return Queue{MaxBatch: n, MaxQueue: q}
}
