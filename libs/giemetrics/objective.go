package giemetrics

import (
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	"github.com/hermod/hermod/libs/telemetry"
)

// Error codes of inference_objective_request_error_total, as upstream
// names them.
const (
	ErrorModelServer        = "ModelServerError"
	ErrorBadRequest         = "BadRequest"
	ErrorUnauthorized       = "Unauthorized"
	ErrorForbidden          = "Forbidden"
	ErrorNotFound           = "NotFound"
	ErrorResourceExhausted  = "ResourceExhausted"
	ErrorServiceUnavailable = "ServiceUnavailable"
	ErrorInternal           = "Internal"
)

// ErrorCode names an answer of HTTP status for the error counter: the
// model server's own error (upstream true), or the way in's refusal.
func ErrorCode(status int, upstream bool) string {
	switch {
	case upstream:
		return ErrorModelServer
	case status == http.StatusBadRequest, status == http.StatusRequestEntityTooLarge:
		return ErrorBadRequest
	case status == http.StatusUnauthorized:
		return ErrorUnauthorized
	case status == http.StatusForbidden:
		return ErrorForbidden
	case status == http.StatusNotFound:
		return ErrorNotFound
	case status == http.StatusTooManyRequests:
		return ErrorResourceExhausted
	case status == http.StatusServiceUnavailable, status == http.StatusGatewayTimeout:
		return ErrorServiceUnavailable
	}
	return ErrorInternal
}

// Objective is the inference_objective family: per request, by requested
// model (model_name) and the model it was sent as (target_model_name;
// Hermod does not rewrite models, so the same).
type Objective struct {
	requests       *prometheus.CounterVec
	errors         *prometheus.CounterVec
	duration       *prometheus.HistogramVec
	requestSizes   *prometheus.HistogramVec
	responseSizes  *prometheus.HistogramVec
	inputTokens    *prometheus.HistogramVec
	outputTokens   *prometheus.HistogramVec
	cachedTokens   *prometheus.HistogramVec
	running        *prometheus.GaugeVec
	normalizedTPOT *prometheus.HistogramVec
	ttft           *prometheus.HistogramVec
	tpot           *prometheus.HistogramVec
}

// NewObjective returns the family, registered on reg (nil: not
// registered); registering it twice on one registry panics, as
// MustRegister does.
func NewObjective(reg prometheus.Registerer) *Objective {
	const model, target = "model_name", "target_model_name"
	o := &Objective{
		requests:       telemetry.NewCounterVec("inference_objective_request_total", help("Counter of inference objective requests broken out for each model and target model."), model, target, "priority"),
		errors:         telemetry.NewCounterVec("inference_objective_request_error_total", help("Counter of inference objective requests errors broken out for each model and target model."), model, target, "error_code"),
		duration:       telemetry.NewHistogramVec("inference_objective_request_duration_seconds", help("Inference objective response latency distribution in seconds for each model and target model."), GeneralLatencyBuckets, model, target),
		requestSizes:   telemetry.NewHistogramVec("inference_objective_request_sizes", help("Inference objective requests size distribution in bytes for each model and target model."), RequestSizeBuckets, model, target),
		responseSizes:  telemetry.NewHistogramVec("inference_objective_response_sizes", help("Inference objective responses size distribution in bytes for each model and target model."), ResponseSizeBuckets, model, target),
		inputTokens:    telemetry.NewHistogramVec("inference_objective_input_tokens", help("Inference objective input token count distribution for requests in each model."), InputTokenBuckets, model, target),
		outputTokens:   telemetry.NewHistogramVec("inference_objective_output_tokens", help("Inference objective output token count distribution for requests in each model."), OutputTokenBuckets, model, target),
		cachedTokens:   telemetry.NewHistogramVec("inference_objective_prompt_cached_tokens", help("Inference objective prompt cached token count distribution for requests in each model."), InputTokenBuckets, model, target),
		running:        telemetry.NewGaugeVec("inference_objective_running_requests", help("Inference objective number of running requests in each model."), model),
		normalizedTPOT: telemetry.NewHistogramVec("inference_objective_normalized_time_per_output_token_seconds", help("Inference objective latency divided by number of output tokens in seconds for each model and target model."), NTPOTBuckets, model, target),
		ttft:           telemetry.NewHistogramVec("inference_objective_request_ttft_seconds", help("Inference objective TTFT distribution in seconds for each model and target model."), GeneralLatencyBuckets, model, target),
		tpot:           telemetry.NewHistogramVec("inference_objective_request_tpot_seconds", help("Inference objective TPOT distribution in seconds for each model and target model."), TPOTBuckets, model, target),
	}
	if reg != nil {
		reg.MustRegister(o.requests, o.errors, o.duration, o.requestSizes, o.responseSizes, o.inputTokens,
			o.outputTokens, o.cachedTokens, o.running, o.normalizedTPOT, o.ttft, o.tpot)
	}
	return o
}

// Started counts a request sent to a model server (after it was routed):
// its size, and one more running.
func (o *Objective) Started(model string, priority, requestBytes int) {
	if o == nil {
		return
	}
	o.requests.WithLabelValues(model, model, strconv.Itoa(priority)).Inc()
	o.requestSizes.WithLabelValues(model, model).Observe(float64(requestBytes))
	if model != "" {
		o.running.WithLabelValues(model).Inc()
	}
}

// Refused counts a request that ended before it was sent (a bad body, a
// pick that failed, flow control), with the code of its answer.
func (o *Objective) Refused(model, errorCode string) {
	if o == nil {
		return
	}
	o.errors.WithLabelValues(model, model, errorCode).Inc()
}

// Finished observes a started request's end from its completion event and
// the bytes of its answer: one fewer running, its latency, its size, its
// tokens, and an error when the model server answered one or the request
// failed on its way.
func (o *Objective) Finished(ev *eventsv1.RequestCompleted, responseBytes int) {
	if o == nil {
		return
	}
	model := ev.GetModel()
	if model != "" {
		o.running.WithLabelValues(model).Dec()
	}
	switch ev.GetOutcome() {
	case eventsv1.CompletionOutcome_COMPLETION_OUTCOME_UPSTREAM_ERROR:
		o.errors.WithLabelValues(model, model, ErrorModelServer).Inc()
	case eventsv1.CompletionOutcome_COMPLETION_OUTCOME_FAILED:
		o.errors.WithLabelValues(model, model, ErrorCode(int(ev.GetStatusCode()), false)).Inc()
	}
	d := ev.GetDuration().AsDuration().Seconds()
	if d > 0 {
		o.duration.WithLabelValues(model, model).Observe(d)
	}
	o.responseSizes.WithLabelValues(model, model).Observe(float64(responseBytes))
	if p := ev.GetPromptTokens(); p > 0 {
		o.inputTokens.WithLabelValues(model, model).Observe(float64(p))
		o.cachedTokens.WithLabelValues(model, model).Observe(float64(ev.GetCachedTokens()))
	}
	if c := ev.GetCompletionTokens(); c > 0 {
		o.outputTokens.WithLabelValues(model, model).Observe(float64(c))
		if d > 0 {
			o.normalizedTPOT.WithLabelValues(model, model).Observe(d / float64(c))
		}
	}
	if t := ev.GetTtft().AsDuration().Seconds(); t > 0 {
		o.ttft.WithLabelValues(model, model).Observe(t)
	}
	if t := ev.GetTpot().AsDuration().Seconds(); t > 0 {
		o.tpot.WithLabelValues(model, model).Observe(t)
	}
}
