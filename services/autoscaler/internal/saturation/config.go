// Package saturation holds the autoscaler's two saturation analyzers: the
// percentage based one (the default; KV-cache usage and queue length against
// thresholds, one replica at a time) and the token based one (capacity and
// demand in KV tokens, with per-variant capacities the optimizer can compare
// across accelerators). Both turn a scaling.Model into scaling.Analysis
// capacity signals for the optimizer (spec/autoscaler.md, "Analyzer 1" and
// "Analyzer 2").
package saturation

import (
	"cmp"
	"errors"
	"fmt"
	"math"
)

// The analyzer names written into scaling.Analysis.Analyzer.
const (
	PercentageAnalyzerName = "saturation-percentage-based"
	TokenAnalyzerName      = "saturation-token-based"
)

// The defaults of reference/004 that both analyzers share.
const (
	defaultKVCacheThreshold     = 0.80
	defaultQueueLengthThreshold = 5
)

// ErrInvalidConfig is wrapped by the Validate methods' errors.
var ErrInvalidConfig = errors.New("invalid saturation config")

// PercentageConfig holds the thresholds of the percentage based analyzer.
// A field that is zero, negative or NaN takes its default when analyzing.
type PercentageConfig struct {
	// KVCacheThreshold is the KV-cache usage (0..1) at which a replica is
	// saturated (kvCacheThreshold, default 0.80).
	KVCacheThreshold float64
	// QueueLengthThreshold is the waiting-request count at which a replica
	// is saturated (queueLengthThreshold, default 5).
	QueueLengthThreshold float64
	// KVSpareTrigger: scale up when the average spare KV (threshold - usage,
	// over non-saturated replicas) drops below it (kvSpareTrigger, 0.10).
	KVSpareTrigger float64
	// QueueSpareTrigger: scale up when the average spare queue drops below
	// it (queueSpareTrigger, default 3).
	QueueSpareTrigger float64
}

// DefaultPercentageConfig returns the defaults of reference/004:
// kvCacheThreshold 0.80, queueLengthThreshold 5, kvSpareTrigger 0.10,
// queueSpareTrigger 3.
func DefaultPercentageConfig() PercentageConfig {
	return PercentageConfig{
		KVCacheThreshold:     defaultKVCacheThreshold,
		QueueLengthThreshold: defaultQueueLengthThreshold,
		KVSpareTrigger:       0.10,
		QueueSpareTrigger:    3,
	}
}

// Validate reports a field out of range, naming it by its YAML key:
// 0 < kvCacheThreshold <= 1, queueLengthThreshold > 0,
// 0 < kvSpareTrigger < kvCacheThreshold and
// 0 < queueSpareTrigger < queueLengthThreshold (a trigger at or above its
// threshold would ask for a scale-up at any load).
func (c PercentageConfig) Validate() error {
	return cmp.Or(
		checkUnit("kvCacheThreshold", c.KVCacheThreshold),
		checkPositive("queueLengthThreshold", c.QueueLengthThreshold),
		checkBelow("kvSpareTrigger", c.KVSpareTrigger, "kvCacheThreshold", c.KVCacheThreshold),
		checkBelow("queueSpareTrigger", c.QueueSpareTrigger, "queueLengthThreshold", c.QueueLengthThreshold),
	)
}

// withDefaults replaces the fields that are not positive finite numbers by
// their defaults, so that the analyzer never divides by zero.
func (c PercentageConfig) withDefaults() PercentageConfig {
	d := DefaultPercentageConfig()
	c.KVCacheThreshold = orDefault(c.KVCacheThreshold, d.KVCacheThreshold)
	c.QueueLengthThreshold = orDefault(c.QueueLengthThreshold, d.QueueLengthThreshold)
	c.KVSpareTrigger = orDefault(c.KVSpareTrigger, d.KVSpareTrigger)
	c.QueueSpareTrigger = orDefault(c.QueueSpareTrigger, d.QueueSpareTrigger)
	return c
}

// TokenConfig holds the thresholds of the token based analyzer. A field that
// is zero, negative or NaN takes its default when analyzing.
type TokenConfig struct {
	// KVCacheThreshold is the usable share of the KV cache: k1 = KV
	// capacity tokens x KVCacheThreshold (kvCacheThreshold, default 0.80).
	KVCacheThreshold float64
	// QueueLengthThreshold is the queue length at which a replica's tokens
	// in use are taken as its observed compute-bound capacity
	// (queueLengthThreshold, default 5).
	QueueLengthThreshold float64
	// ScaleUpThreshold: required = demand/ScaleUpThreshold - anticipated
	// supply (scaleUpThreshold, default 0.85).
	ScaleUpThreshold float64
	// ScaleDownBoundary: spare = supply - demand/ScaleDownBoundary
	// (scaleDownBoundary, default 0.70).
	ScaleDownBoundary float64
}

// DefaultTokenConfig returns the defaults of reference/004:
// kvCacheThreshold 0.80, queueLengthThreshold 5, scaleUpThreshold 0.85,
// scaleDownBoundary 0.70.
func DefaultTokenConfig() TokenConfig {
	return TokenConfig{
		KVCacheThreshold:     defaultKVCacheThreshold,
		QueueLengthThreshold: defaultQueueLengthThreshold,
		ScaleUpThreshold:     0.85,
		ScaleDownBoundary:    0.70,
	}
}

// Validate reports a field out of range, naming it by its YAML key:
// 0 < kvCacheThreshold <= 1, queueLengthThreshold > 0 and
// 0 < scaleDownBoundary < scaleUpThreshold <= 1.
func (c TokenConfig) Validate() error {
	return cmp.Or(
		checkUnit("kvCacheThreshold", c.KVCacheThreshold),
		checkPositive("queueLengthThreshold", c.QueueLengthThreshold),
		checkUnit("scaleUpThreshold", c.ScaleUpThreshold),
		checkBelow("scaleDownBoundary", c.ScaleDownBoundary, "scaleUpThreshold", c.ScaleUpThreshold),
	)
}

// withDefaults replaces the fields that are not positive finite numbers by
// their defaults, so that the analyzer never divides by zero.
func (c TokenConfig) withDefaults() TokenConfig {
	d := DefaultTokenConfig()
	c.KVCacheThreshold = orDefault(c.KVCacheThreshold, d.KVCacheThreshold)
	c.QueueLengthThreshold = orDefault(c.QueueLengthThreshold, d.QueueLengthThreshold)
	c.ScaleUpThreshold = orDefault(c.ScaleUpThreshold, d.ScaleUpThreshold)
	c.ScaleDownBoundary = orDefault(c.ScaleDownBoundary, d.ScaleDownBoundary)
	return c
}

// checkUnit reports a field outside (0, 1].
func checkUnit(field string, v float64) error {
	if v > 0 && v <= 1 {
		return nil
	}
	return fmt.Errorf("%w: %s %v must be in (0, 1]", ErrInvalidConfig, field, v)
}

// checkPositive reports a field that is not a finite number > 0.
func checkPositive(field string, v float64) error {
	if v > 0 && !math.IsInf(v, 0) {
		return nil
	}
	return fmt.Errorf("%w: %s %v must be > 0", ErrInvalidConfig, field, v)
}

// checkBelow reports a field outside (0, limit), limit being the value of
// the field limitField.
func checkBelow(field string, v float64, limitField string, limit float64) error {
	if v > 0 && v < limit {
		return nil
	}
	return fmt.Errorf("%w: %s %v must be in (0, %s %v)", ErrInvalidConfig, field, v, limitField, limit)
}

func orDefault(v, d float64) float64 {
	if v > 0 && !math.IsInf(v, 0) {
		return v
	}
	return d
}

// maxInput caps every replica and model input: 1e15 tokens or requests is
// far beyond any real server, and the cap keeps every product and sum the
// analyzers form finite.
const maxInput = 1e15

// clean turns an observed value into a usable one: NaN, infinite and
// negative values (garbage, or "unknown") become 0, huge ones maxInput.
func clean(x float64) float64 {
	if !(x > 0) || math.IsInf(x, 1) {
		return 0
	}
	return min(x, maxInput)
}

// ratio is clean(x) in 0..1 (prefix hit rates).
func ratio(x float64) float64 { return min(clean(x), 1) }

// nonNeg is the last guard on an output: NaN, infinite or negative -> 0.
func nonNeg(x float64) float64 {
	if !(x > 0) || math.IsInf(x, 0) {
		return 0
	}
	return x
}
