package tlsconfig

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hermod/hermod/libs/telemetry"
)

// metrics are a Source's, labelled with its name; Sources sharing a
// registerer share the collectors.
type metrics struct {
	expiry  prometheus.Gauge
	reloads *prometheus.CounterVec
	name    string
}

func newMetrics(reg prometheus.Registerer, name string) *metrics {
	expiry := register(reg, telemetry.NewGaugeVec("hermod_tls_certificate_expiry_seconds",
		"Seconds until the configured certificate's NotAfter (negative: expired), by configuration name.", "name"))
	reloads := register(reg, telemetry.NewCounterVec("hermod_tls_reloads_total",
		"Loads of changed TLS files, by configuration name and result (ok, error: the previous material stays).", "name", "result"))
	return &metrics{expiry: expiry.WithLabelValues(name), reloads: reloads, name: name}
}

func (m *metrics) observe(mat *generation) {
	if left, ok := mat.untilExpiry(time.Now()); ok {
		m.expiry.Set(left.Seconds())
	}
}

func (m *metrics) reloaded(result string) { m.reloads.WithLabelValues(m.name, result).Inc() }

// register registers c, or returns the collector already registered under
// its name. A nil reg registers nothing.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if reg == nil {
		return c
	}
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
	}
	return c
}
