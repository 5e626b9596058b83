package proxy

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	"github.com/hermod/hermod/libs/giemetrics"
	"github.com/hermod/hermod/libs/telemetry"
)

// Metrics are the request path's Prometheus metrics.
type Metrics struct {
	requests     *prometheus.CounterVec
	duration     *prometheus.HistogramVec
	ttft         *prometheus.HistogramVec
	pickDuration prometheus.Histogram
	attempts     *prometheus.CounterVec
	fallbacks    prometheus.Counter
	outcomes     *prometheus.CounterVec
	inflight     prometheus.Gauge
	// objective is GIE's per-request family (inference_objective_*).
	objective *giemetrics.Objective
}

// NewMetrics registers the metrics on reg (nil: not registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	latency := prometheus.ExponentialBuckets(0.001, 2, 18)
	m := &Metrics{
		requests:     telemetry.NewCounterVec("hermod_gateway_requests_total", "Inference requests by API and HTTP status sent to the client.", "api", "code"),
		duration:     telemetry.NewHistogramVec("hermod_gateway_request_duration_seconds", "Time from the request's arrival to the end of its response.", latency, "api"),
		ttft:         telemetry.NewHistogramVec("hermod_gateway_time_to_first_token_seconds", "Time from the pick to the first event of a stream (first byte of other responses).", latency, "api"),
		pickDuration: telemetry.NewHistogram("hermod_gateway_pick_duration_seconds", "Time of the Pick call to the picker.", prometheus.ExponentialBuckets(50e-6, 2, 16)),
		attempts:     telemetry.NewCounterVec("hermod_gateway_upstream_attempts_total", "Requests sent to endpoints, by result: answered, error (no answer), status_5xx (retried), canceled.", "result"),
		fallbacks:    telemetry.NewCounter("hermod_gateway_fallbacks_total", "Requests sent to a fallback endpoint after the previous one failed before answering."),
		outcomes:     telemetry.NewCounterVec("hermod_gateway_completions_total", "Routed requests by how they ended.", "outcome"),
		inflight:     telemetry.NewGauge("hermod_gateway_inflight_requests", "Inference requests being served."),
		objective:    giemetrics.NewObjective(reg),
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.duration, m.ttft, m.pickDuration, m.attempts, m.fallbacks, m.outcomes, m.inflight)
	}
	return m
}

// apiMetrics are the metrics of one API, curried once.
type apiMetrics struct {
	requests *prometheus.CounterVec // by code
	duration prometheus.Observer
	ttft     prometheus.Observer
}

func (m *Metrics) forAPI(api string) *apiMetrics {
	return &apiMetrics{
		requests: m.requests.MustCurryWith(prometheus.Labels{"api": api}),
		duration: m.duration.WithLabelValues(api),
		ttft:     m.ttft.WithLabelValues(api),
	}
}

func (m *apiMetrics) observe(req *request, end time.Time, ev *eventsv1.RequestCompleted) {
	code := strconv.Itoa(req.status)
	if req.clientGone {
		code = "499"
	}
	m.requests.WithLabelValues(code).Inc()
	m.duration.Observe(end.Sub(req.start).Seconds())
	if ev.GetTtft() != nil {
		m.ttft.Observe(ev.GetTtft().AsDuration().Seconds())
	}
}
