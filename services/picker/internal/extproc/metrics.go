package extproc

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hermod/hermod/libs/giemetrics"
	"github.com/hermod/hermod/libs/telemetry"
)

// Stream outcomes (the outcome label of hermod_picker_extproc_streams_total):
// the completion outcome of a routed request (openai.OutcomeLabel), or what
// became of a stream that routed none.
const (
	// outcomePassthrough: a request to a path the picker does not route
	// (/v1/models, ...), passed through unmodified.
	outcomePassthrough = "passthrough"
	// outcomeImmediate: answered by the picker itself (an error status).
	outcomeImmediate = "immediate"
	// outcomeAbandoned: the stream ended before the request was routed
	// (the client went away during its body, say).
	outcomeAbandoned = "abandoned"
	// outcomeProtocolError: the data plane broke the ext_proc protocol.
	outcomeProtocolError = "protocol_error"
)

// Metrics are the ext_proc server's Prometheus metrics.
type Metrics struct {
	streams   *prometheus.CounterVec
	immediate *prometheus.CounterVec
	route     prometheus.Histogram
	active    prometheus.Gauge
	// objective is GIE's per-request family (inference_objective_*).
	objective *giemetrics.Objective
}

// NewMetrics registers the metrics on reg (nil: not registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		streams:   telemetry.NewCounterVec("hermod_picker_extproc_streams_total", "Envoy ext_proc streams (one per HTTP request) by outcome: success, upstream_error, failed, canceled (routed requests, by completion outcome), passthrough (not an inference path), immediate (answered by the picker), abandoned (ended before routing), protocol_error.", "outcome"),
		immediate: telemetry.NewCounterVec("hermod_picker_extproc_immediate_responses_total", "Requests the picker answered itself through ext_proc (an immediate response), by HTTP status code.", "code"),
		route:     telemetry.NewHistogram("hermod_picker_extproc_route_duration_seconds", "Time from the end of a request body to the routing answer sent to the data plane (the pick and the body streamed back).", prometheus.ExponentialBuckets(10e-6, 2, 18)),
		active:    telemetry.NewGauge("hermod_picker_extproc_streams_in_flight", "Envoy ext_proc streams open now."),
		objective: giemetrics.NewObjective(reg),
	}
	if reg != nil {
		reg.MustRegister(m.streams, m.immediate, m.route, m.active)
	}
	return m
}

func (m *Metrics) immediateResponse(code int) {
	m.immediate.WithLabelValues(strconv.Itoa(code)).Inc()
}
