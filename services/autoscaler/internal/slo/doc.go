// Package slo is the autoscaler's SLO analyzer (spec/autoscaler.md,
// "Analyzer 3: SLO (queueing model)").
//
// It has four parts, each in its own file:
//
//   - the performance model of one replica (params.go): iteration, prefill
//     and decode-step times and the state-dependent service rate, from three
//     learned parameters alpha, beta and gamma;
//   - the queueing model (model.go): a state-dependent M/M/1/K birth-death
//     chain solved in log space, giving throughput, waiting time, TTFT and ITL
//     at an arrival rate;
//   - sizing (sizing.go, config.go): the SLO targets (explicit or inferred
//     from the idle latency times sloMultiplier), the largest arrival rate a
//     replica sustains within them (lambda*) and the replica count;
//   - the online tuner (tuner.go, observe.go): an extended Kalman filter that
//     learns alpha, beta and gamma from observed TTFT and ITL, with a
//     serialisable state so a new leader does not start cold.
//
// Analyze (analyze.go) turns these into the scaling.Analysis the optimizer
// reads, in requests per second.
//
// Units: times are milliseconds (names end in Ms); rates handed in or out
// are requests per second (names end in PerSecond). Inside the chain the
// arrival and service rates are requests per millisecond, so that they
// match the millisecond times; the conversion happens in one place.
package slo
