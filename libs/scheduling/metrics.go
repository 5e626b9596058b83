package scheduling

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hermod/hermod/libs/telemetry"
)

// Extension point names used as the extension_point metric label.
const (
	PointProfileHandler   = "ProfileHandler"
	PointFilter           = "Filter"
	PointScorer           = "Scorer"
	PointPicker           = "Picker"
	PointPrepareData      = "PrepareData"
	PointPrepareCycle     = "PrepareCycle"
	PointPreRequest       = "PreRequest"
	PointAdmission        = "Admission"
	PointResponseReceived = "ResponseReceived"
	PointResponseComplete = "ResponseComplete"
)

// SchedulerMetrics are the scheduler's Prometheus metrics, named as the GIE
// endpoint picker names them so existing dashboards work.
type SchedulerMetrics struct {
	e2e            prometheus.Histogram
	pluginDuration *prometheus.HistogramVec
	attempts       *prometheus.CounterVec
	success        prometheus.Counter
}

// NewSchedulerMetrics creates the scheduler metrics and registers them with
// reg (nil: not registered, for tests and benchmarks). Create them once per
// registry and pass them to every Scheduler built for it (a reloaded config
// builds a new Scheduler with the same metrics): registering twice panics.
func NewSchedulerMetrics(reg prometheus.Registerer) *SchedulerMetrics {
	m := &SchedulerMetrics{
		e2e:            telemetry.NewHistogram("inference_extension_scheduler_e2e_duration_seconds", "Duration of one scheduling cycle, prepare-data to pre-request.", []float64{1e-6, 2.5e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 5e-3, 0.01, 0.05}),
		pluginDuration: telemetry.NewHistogramVec("inference_extension_plugin_duration_seconds", "Duration of one plugin call at one extension point.", []float64{1e-7, 5e-7, 1e-6, 2.5e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 1e-3, 0.01}, "extension_point", "plugin_type", "plugin_name"),
		attempts:       telemetry.NewCounterVec("inference_extension_scheduler_attempts_total", "Scheduling cycles by outcome (success, or the failure kind).", "status"),
	}
	if reg != nil {
		reg.MustRegister(m.e2e, m.pluginDuration, m.attempts)
	}
	m.success = m.attempts.WithLabelValues("success")
	return m
}

// pluginTimer observes one plugin's calls at one extension point. The zero
// value (metrics disabled) does nothing and costs no clock reads.
type pluginTimer struct {
	obs prometheus.Observer
}

func (m *SchedulerMetrics) timer(point string, p Plugin) pluginTimer {
	if m == nil {
		return pluginTimer{}
	}
	tn := p.TypedName()
	return pluginTimer{obs: m.pluginDuration.WithLabelValues(point, tn.Type, tn.Name)}
}

func (t pluginTimer) start() time.Time {
	if t.obs == nil {
		return time.Time{}
	}
	return time.Now()
}

func (t pluginTimer) done(start time.Time) {
	if t.obs != nil {
		t.obs.Observe(time.Since(start).Seconds())
	}
}

func (m *SchedulerMetrics) cycleDone(start time.Time, err error) {
	if m == nil {
		return
	}
	m.e2e.Observe(time.Since(start).Seconds())
	if err == nil {
		m.success.Inc()
		return
	}
	status := KindInternal.String()
	var se *Error
	if errors.As(err, &se) {
		status = se.Kind.String()
	}
	m.attempts.WithLabelValues(status).Inc()
}
