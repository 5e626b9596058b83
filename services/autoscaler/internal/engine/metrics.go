package engine

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hermod/hermod/libs/telemetry"
)

// Metrics are the engine's Prometheus metrics.
type Metrics struct {
	leader     prometheus.Gauge
	decisions  *prometheus.CounterVec
	actuations *prometheus.CounterVec
	desired    *prometheus.GaugeVec
	reaction   *prometheus.HistogramVec
	evaluation prometheus.Histogram
}

// NewMetrics registers the engine's metrics on reg (nil: unregistered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		leader:     telemetry.NewGauge("hermod_autoscaler_leader", "1 while this replica leads the autoscaler."),
		decisions:  telemetry.NewCounterVec("hermod_autoscaler_decisions_total", "Scaling decisions published, by trigger.", "trigger"),
		actuations: telemetry.NewCounterVec("hermod_autoscaler_actuations_total", "Replica changes sent to the actuator, by result.", "result"),
		desired:    telemetry.NewGaugeVec("hermod_autoscaler_desired_replicas", "The replicas last chosen per variant.", "variant"),
		reaction:   telemetry.NewHistogramVec("hermod_autoscaler_reaction_seconds", "From receiving the triggering event to the decision, by trigger.", []float64{.001, .005, .01, .025, .05, .1, .2, .5, 1, 2.5, 5}, "trigger"),
		evaluation: telemetry.NewHistogram("hermod_autoscaler_evaluation_seconds", "Time to evaluate every model group once.", prometheus.ExponentialBuckets(0.0001, 4, 8)),
	}
	if reg != nil {
		reg.MustRegister(m.leader, m.decisions, m.actuations, m.desired, m.reaction, m.evaluation)
	}
	return m
}
