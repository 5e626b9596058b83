package kubediscovery

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hermod/hermod/libs/telemetry"
)

// metrics are a Source's Prometheus metrics.
type metrics struct {
	reg        prometheus.Registerer
	endpoints  prometheus.Gauge
	syncErrors prometheus.Counter
	leader     prometheus.Gauge
}

// newMetrics creates the metrics and registers them on reg (if not nil).
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		reg:        reg,
		endpoints:  telemetry.NewGauge("hermod_collector_discovery_endpoints", "Registry entries of discovered Kubernetes pods that this replica holds as the discovery leader (0 on the other replicas)."),
		syncErrors: telemetry.NewCounter("hermod_collector_discovery_sync_errors_total", "Failed attempts of the discovery leader to bring the endpoint registry in line with the Ready pods (each is retried with backoff)."),
		leader:     telemetry.NewGauge("hermod_collector_discovery_leader", "1 while this replica is the pool's discovery leader (the one writer of discovered endpoints), else 0."),
	}
	if reg == nil {
		return m, nil
	}
	cs := m.collectors()
	for i, c := range cs {
		if err := reg.Register(c); err != nil {
			for _, done := range cs[:i] {
				reg.Unregister(done)
			}
			return nil, fmt.Errorf("register discovery metrics: %w", err)
		}
	}
	return m, nil
}

func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.endpoints, m.syncErrors, m.leader}
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
