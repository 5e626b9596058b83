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
// endpoint picker names them and as the llm-d router does (llm_d_epp_*),
// so that existing dashboards work. Model names are bounded (the first
// giemetrics.MaxLabelValues, then "other").
type SchedulerMetrics struct {
	e2e            prometheus.Histogram
	pluginDuration *prometheus.HistogramVec
	attempts       *prometheus.CounterVec
	failures       *prometheus.CounterVec

	eppE2E, eppRequestProcessing, eppResponseProcessing prometheus.Histogram
	eppPluginDuration                                   *prometheus.HistogramVec
	eppAttempts                                         *prometheus.CounterVec

	models *giemetrics.BoundedLabel
}

// Buckets of the picker's own processing time per request and per
// response (llm-d router v0.10).
var (
	RequestProcessingBuckets  = []float64{0.0005, 0.001, 0.002, 0.005, 0.01, 0.015, 0.025, 0.04, 0.06, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}
	ResponseProcessingBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}
)

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

		eppE2E: telemetry.NewHistogram(giemetrics.EPPPrefix+"scheduler_e2e_duration_seconds", "[ALPHA] End-to-end scheduling latency distribution in seconds.", giemetrics.FastBuckets),
		eppPluginDuration: telemetry.NewHistogramVec(giemetrics.EPPPrefix+"plugin_duration_seconds", "[ALPHA] Plugin processing latency distribution in seconds for each extension point, plugin type and plugin name.",
			giemetrics.FastBuckets, "extension_point", "plugin_type", "plugin_name"),
		eppAttempts: telemetry.NewCounterVec(giemetrics.EPPPrefix+"scheduler_attempts_total", "[ALPHA] Total number of successful and failed scheduling attempts.",
			"status", "target_model_name", "endpoint_name", "namespace", "port"),
		eppRequestProcessing: telemetry.NewHistogram(giemetrics.EPPPrefix+"request_processing_duration_seconds",
			"[ALPHA] The picker's own processing time of a request (parsing, admission, scheduling, its headers), in seconds.", RequestProcessingBuckets),
		eppResponseProcessing: telemetry.NewHistogram(giemetrics.EPPPrefix+"response_processing_duration_seconds",
			"[ALPHA] The picker's own processing time of a response (its headers and completion), in seconds.", ResponseProcessingBuckets),
		models: giemetrics.NewBoundedLabel(giemetrics.MaxLabelValues),
	}
	if reg != nil {
		reg.MustRegister(m.e2e, m.pluginDuration, m.attempts, m.failures,
			m.eppE2E, m.eppPluginDuration, m.eppAttempts, m.eppRequestProcessing, m.eppResponseProcessing)
	}
	return m
}

// RequestProcessed observes the picker's own time on a request, from when
// it arrived to its answer (the Pick, or ext_proc's request headers and
// body), whatever the endpoint then takes.
func (m *SchedulerMetrics) RequestProcessed(d time.Duration) {
	if m != nil {
		m.eppRequestProcessing.Observe(d.Seconds())
	}
}

// ResponseProcessed observes the picker's own time on a response (its
// headers, its completion).
func (m *SchedulerMetrics) ResponseProcessed(d time.Duration) {
	if m != nil {
		m.eppResponseProcessing.Observe(d.Seconds())
	}
}

// pluginTimer observes one plugin's calls at one extension point. The zero
// value (metrics disabled) does nothing and costs no clock reads.
type pluginTimer struct {
	obs, epp prometheus.Observer
}

func (m *SchedulerMetrics) timer(point string, p Plugin) pluginTimer {
	if m == nil {
		return pluginTimer{}
	}
	tn := p.TypedName()
	return pluginTimer{obs: m.pluginDuration.WithLabelValues(point, tn.Type, tn.Name), epp: m.eppPluginDuration.WithLabelValues(point, tn.Type, tn.Name)}
}

func (t pluginTimer) start() time.Time {
	if t.obs == nil {
		return time.Time{}
	}
	return time.Now()
}

func (t pluginTimer) done(start time.Time) {
	if t.obs != nil {
		d := time.Since(start).Seconds()
		t.obs.Observe(d)
		t.epp.Observe(d)
	}
}

// cycleDone observes a cycle that began at start: its duration, and the
// attempt by status (success with the primary target's pod and port, or
// failure) and, for a failure, its kind.
func (m *SchedulerMetrics) cycleDone(start time.Time, req *Request, res *Result, err error) {
	if m == nil {
		return
	}
	d := time.Since(start).Seconds()
	m.e2e.Observe(d)
	m.eppE2E.Observe(d)
	model := m.models.Value(req.Model)
	if err == nil {
		pod, port := "", ""
		if t := res.Target(); t.Endpoint != nil {
			pod, port = t.Endpoint.Name, strconv.Itoa(t.Port)
		}
		m.attempts.WithLabelValues("success", model, pod, "", port).Inc()
		m.eppAttempts.WithLabelValues("success", model, pod, "", port).Inc()
		return
	}
	m.attempts.WithLabelValues("failure", model, "", "", "").Inc()
	m.eppAttempts.WithLabelValues("failure", model, "", "", "").Inc()
	kind := KindInternal.String()
	var se *Error
	if errors.As(err, &se) {
		kind = se.Kind.String()
	}
	m.failures.WithLabelValues(kind).Inc()
}
