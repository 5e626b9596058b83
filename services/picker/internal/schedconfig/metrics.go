package schedconfig

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hermod/hermod/libs/telemetry"
)

// Registerer registers metrics (a prometheus.Registerer).
type Registerer = prometheus.Registerer

type metrics struct {
	accepted, rejected prometheus.Counter
	revision           prometheus.Gauge
}

func newMetrics(reg Registerer) *metrics {
	loads := telemetry.NewCounterVec("hermod_picker_config_loads_total", "EndpointPickerConfig versions applied, by result (accepted or rejected).", "result")
	m := &metrics{
		accepted: loads.WithLabelValues("accepted"),
		rejected: loads.WithLabelValues("rejected"),
		revision: telemetry.NewGauge("hermod_picker_config_revision", "etcd revision of the EndpointPickerConfig in force (0 for a file or the default)."),
	}
	if reg != nil {
		reg.MustRegister(loads, m.revision)
	}
	return m
}
