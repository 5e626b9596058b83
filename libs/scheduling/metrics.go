package scheduling

import (
	"errors"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hermod/hermod/libs/giemetrics"
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
	failures       *prometheus.CounterVec
}

// NewSchedulerMetrics creates the scheduler metrics and registers them with
// reg (nil: not registered, for tests and benchmarks). Create them once per
// registry and pass them to every Scheduler built for it (a reloaded config
// builds a new Scheduler with the same metrics): registering twice panics.
func NewSchedulerMetrics(reg prometheus.Registerer) *SchedulerMetrics {
	m := &SchedulerMetrics{
		e2e:            telemetry.NewHistogram("inference_extension_scheduler_e2e_duration_seconds", "[ALPHA] End-to-end scheduling latency distribution in seconds.", giemetrics.FastBuckets),
		pluginDuration: telemetry.NewHistogramVec("inference_extension_plugin_duration_seconds", "[ALPHA] Plugin processing latency distribution in seconds for each extension point, plugin type and plugin name.", giemetrics.FastBuckets, "extension_point", "plugin_type", "plugin_name"),
		attempts: telemetry.NewCounterVec("inference_extension_scheduler_attempts_total", "[ALPHA] Total number of successful and failed scheduling attempts.",
			"status", "target_model_name", "pod_name", "namespace", "port"),
		failures: telemetry.NewCounterVec("hermod_scheduler_failures_total", "Scheduling cycles that chose no endpoint, by kind: no_candidates, no_match (the filters left no endpoint), shed, bad_request, internal.", "kind"),
	}
	if reg != nil {
		reg.MustRegister(m.e2e, m.pluginDuration, m.attempts, m.failures)
	}
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

// cycleDone observes a cycle that began at start: its duration, and the
// attempt by status (success with the primary target's pod and port, or
// failure) and, for a failure, its kind.
func (m *SchedulerMetrics) cycleDone(start time.Time, req *Request, res *Result, err error) {
	if m == nil {
		return
	}
	m.e2e.Observe(time.Since(start).Seconds())
	if err == nil {
		pod, port := "", ""
		if t := res.Target(); t.Endpoint != nil {
			pod, port = t.Endpoint.Name, strconv.Itoa(t.Port)
		}
		m.attempts.WithLabelValues("success", req.Model, pod, "", port).Inc()
		return
	}
	m.attempts.WithLabelValues("failure", req.Model, "", "", "").Inc()
	kind := KindInternal.String()
	var se *Error
	if errors.As(err, &se) {
		kind = se.Kind.String()
	}
	m.failures.WithLabelValues(kind).Inc()
}
