package engine

import "github.com/prometheus/client_golang/prometheus"

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
		leader: prometheus.NewGauge(prometheus.GaugeOpts{Name: "hermod_autoscaler_leader", Help: "1 while this replica leads the autoscaler."}),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hermod_autoscaler_decisions_total",
			Help: "Scaling decisions published, by trigger."}, []string{"trigger"}),
		actuations: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hermod_autoscaler_actuations_total",
			Help: "Replica changes sent to the actuator, by result."}, []string{"result"}),
		desired: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "hermod_autoscaler_desired_replicas",
			Help: "The replicas last chosen per variant."}, []string{"variant"}),
		reaction: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "hermod_autoscaler_reaction_seconds",
			Help:    "From receiving the triggering event to the decision, by trigger.",
			Buckets: []float64{.001, .005, .01, .025, .05, .1, .2, .5, 1, 2.5, 5}}, []string{"trigger"}),
		evaluation: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "hermod_autoscaler_evaluation_seconds",
			Help: "Time to evaluate every model group once.", Buckets: prometheus.ExponentialBuckets(0.0001, 4, 8)}),
	}
	if reg != nil {
		reg.MustRegister(m.leader, m.decisions, m.actuations, m.desired, m.reaction, m.evaluation)
	}
	return m
}
