package filediscovery

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hermod/hermod/libs/telemetry"
)

// The values of the result label of the reloads counter.
const (
	resultOK    = "ok"
	resultError = "error"
)

// metrics are a Source's Prometheus metrics.
type metrics struct {
	reg        prometheus.Registerer
	reloads    *prometheus.CounterVec
	entries    prometheus.Gauge
	valid      prometheus.Gauge
	registered prometheus.Gauge
	syncErrors prometheus.Counter
	leader     prometheus.Gauge
}

// newMetrics creates the metrics and registers them on reg (if not nil).
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		reg: reg,
		reloads: telemetry.NewCounterVec("hermod_collector_endpoints_file_reloads_total",
			"Loads of the endpoints file by result: ok (its entries became the desired state) or error (unreadable or invalid; the last good entries stay).", "result"),
		entries: telemetry.NewGauge("hermod_collector_endpoints_file_entries",
			"Endpoints of the last good endpoints file (the desired state, on every replica)."),
		valid: telemetry.NewGauge("hermod_collector_endpoints_file_valid",
			"1 when the endpoints file as last read is the one in force, 0 when it is unreadable or invalid (the last good entries stay registered)."),
		registered: telemetry.NewGauge("hermod_collector_endpoints_file_registered",
			"Registry entries of the endpoints file that this replica holds as the file's writer (0 on the other replicas)."),
		syncErrors: telemetry.NewCounter("hermod_collector_endpoints_file_sync_errors_total",
			"Failed attempts of the endpoints file's writer to bring the registry in line with the file (each is retried with backoff)."),
		leader: telemetry.NewGauge("hermod_collector_endpoints_file_leader",
			"1 while this replica is the pool's endpoints-file writer (the leader of its election), else 0."),
	}
	// Both results exist from the start, so that rate() and alerts see them.
	m.reloads.WithLabelValues(resultOK)
	m.reloads.WithLabelValues(resultError)
	if reg == nil {
		return m, nil
	}
	cs := m.collectors()
	for i, c := range cs {
		if err := reg.Register(c); err != nil {
			for _, done := range cs[:i] {
				reg.Unregister(done)
			}
			return nil, fmt.Errorf("register endpoints file metrics: %w", err)
		}
	}
	return m, nil
}

func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.reloads, m.entries, m.valid, m.registered, m.syncErrors, m.leader}
}

// unregister removes the metrics from the registerer.
func (m *metrics) unregister() {
	if m.reg == nil {
		return
	}
	for _, c := range m.collectors() {
		m.reg.Unregister(c)
	}
}
