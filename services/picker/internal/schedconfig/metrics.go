package schedconfig

import "github.com/prometheus/client_golang/prometheus"

// Registerer registers metrics (a prometheus.Registerer).
type Registerer = prometheus.Registerer

type metrics struct {
	accepted, rejected prometheus.Counter
	revision           prometheus.Gauge
}

func newMetrics(reg Registerer) *metrics {
	loads := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hermod_picker_config_loads_total",
		Help: "EndpointPickerConfig versions applied, by result (accepted or rejected).",
	}, []string{"result"})
	m := &metrics{
		accepted: loads.WithLabelValues("accepted"),
		rejected: loads.WithLabelValues("rejected"),
		revision: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hermod_picker_config_revision",
			Help: "etcd revision of the EndpointPickerConfig in force (0 for a file or the default).",
		}),
	}
	if reg != nil {
		reg.MustRegister(loads, m.revision)
	}
	return m
}
