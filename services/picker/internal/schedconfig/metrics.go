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
	newestRevision     prometheus.Gauge
	newestInvalid      prometheus.Gauge
}

func newMetrics(reg Registerer) *metrics {
	loads := telemetry.NewCounterVec("hermod_picker_config_loads_total", "EndpointPickerConfig versions applied, by result (accepted or rejected).", "result")
	m := &metrics{
		accepted: loads.WithLabelValues("accepted"),
		rejected: loads.WithLabelValues("rejected"),
		revision: telemetry.NewGauge("hermod_picker_config_revision", "etcd revision of the EndpointPickerConfig in force (0 for a file or the default)."),
		newestRevision: telemetry.NewGauge("hermod_picker_config_newest_revision",
			"etcd revision of the newest EndpointPickerConfig version seen, valid or not (0 for a file or the default)."),
		newestInvalid: telemetry.NewGauge("hermod_picker_config_newest_invalid",
			"1 when the newest EndpointPickerConfig version is invalid and an older one (hermod_picker_config_revision) or the default is in force, else 0."),
	}
	if reg != nil {
		reg.MustRegister(loads, m.revision, m.newestRevision, m.newestInvalid)
	}
	return m
}
