package slo

import "errors"

// Sentinel errors callers can branch on with errors.Is. Every error this
// package returns wraps one of them with the field and value at fault.
var (
	// ErrInvalidParams: alpha, beta or gamma is out of its domain.
	ErrInvalidParams = errors.New("invalid performance parameters")
	// ErrInvalidWorkload: the average input or output tokens are out of
	// their domain.
	ErrInvalidWorkload = errors.New("invalid workload")
	// ErrInvalidQueue: the batch or queue limit is out of its domain.
	ErrInvalidQueue = errors.New("invalid queue limits")
	// ErrInvalidRate: an arrival rate is negative, NaN or infinite.
	ErrInvalidRate = errors.New("invalid arrival rate")
	// ErrInvalidTargets: a latency target is not positive and finite.
	ErrInvalidTargets = errors.New("invalid latency targets")
	// ErrInvalidConfig: a Config field is out of its domain.
	ErrInvalidConfig = errors.New("invalid slo config")
	// ErrInvalidObservation: an observation cannot be used by the tuner.
	ErrInvalidObservation = errors.New("invalid observation")
	// ErrInvalidState: a persisted tuner state cannot be restored.
	ErrInvalidState = errors.New("invalid tuner state")
	// ErrInfeasible: the targets are not met even by an idle replica, so
	// no arrival rate (and no replica count) meets them.
	ErrInfeasible = errors.New("latency targets infeasible")
)
