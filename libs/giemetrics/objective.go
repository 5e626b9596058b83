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

// Labels are what a request's series are labelled with: the model it
// asked for, its priority and its flow (fairness id).
type Labels struct {
	Model      string
	Priority   int
	FairnessID string
}

// Objective is the per-request family under both of upstream's names:
// GIE's inference_objective_* (by model_name and target_model_name; Hermod
// does not rewrite models, so the same) and the llm-d router's llm_d_epp_*
// (also by fairness_id and priority). Model names, fairness ids and
// priorities are bounded (MaxLabelValues each, then "other").
type Objective struct {
	models, flows, priorities *BoundedLabel

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

	epp eppObjective
}

// eppObjective is the llm_d_epp_* twin.
type eppObjective struct {
	requests, errors                                     *prometheus.CounterVec
	duration, requestSizes, responseSizes                *prometheus.HistogramVec
	inputTokens, outputTokens, cachedTokens, ntpot, ttft *prometheus.HistogramVec
	tpot                                                 *prometheus.HistogramVec
	running                                              *prometheus.GaugeVec
}

// Buckets of the llm_d_epp_* histograms that differ from GIE's.
var (
	EPPTTFTBuckets = []float64{0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1, 1.25, 1.5, 2, 3, 4, 5, 6, 8, 10, 15, 20, 30, 45, 60, 120}
	EPPTPOTBuckets = []float64{0.0005, 0.00205, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.125, 0.15, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8, 1, 2}
)

// NewObjective returns the family, registered on reg (nil: not
// registered); registering it twice on one registry panics, as
// MustRegister does.
func NewObjective(reg prometheus.Registerer) *Objective {
	const model, target = "model_name", "target_model_name"
	o := &Objective{
		models:         NewBoundedLabel(MaxLabelValues),
		flows:          NewBoundedLabel(MaxLabelValues),
		priorities:     NewBoundedLabel(MaxLabelValues),
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
	l := []string{model, target, "fairness_id", "priority"}
	with := func(extra ...string) []string { return append(append([]string{}, l...), extra...) }
	o.epp = eppObjective{
		requests:      telemetry.NewCounterVec(EPPPrefix+"request_total", help("Counter of requests broken out by model, target model, fairness id and priority."), l...),
		errors:        telemetry.NewCounterVec(EPPPrefix+"request_error_total", help("Counter of request errors broken out by model, target model, fairness id, priority and error code."), with("error_code")...),
		duration:      telemetry.NewHistogramVec(EPPPrefix+"request_duration_seconds", help("Request latency distribution in seconds."), GeneralLatencyBuckets, l...),
		requestSizes:  telemetry.NewHistogramVec(EPPPrefix+"request_size_bytes", help("Request size distribution in bytes."), RequestSizeBuckets, l...),
		responseSizes: telemetry.NewHistogramVec(EPPPrefix+"response_size_bytes", help("Response size distribution in bytes."), ResponseSizeBuckets, l...),
		inputTokens:   telemetry.NewHistogramVec(EPPPrefix+"request_input_tokens", help("Input token count distribution of requests."), InputTokenBuckets, l...),
		outputTokens:  telemetry.NewHistogramVec(EPPPrefix+"request_output_tokens", help("Output token count distribution of requests."), OutputTokenBuckets, l...),
		cachedTokens:  telemetry.NewHistogramVec(EPPPrefix+"request_cached_tokens", help("Prompt cached token count distribution of requests."), InputTokenBuckets, l...),
		running:       telemetry.NewGaugeVec(EPPPrefix+"request_running", help("Number of requests running."), l...),
		ntpot:         telemetry.NewHistogramVec(EPPPrefix+"request_ntpot_seconds", help("Request latency divided by its output tokens, in seconds."), NTPOTBuckets, l...),
		ttft:          telemetry.NewHistogramVec(EPPPrefix+"request_ttft_seconds", help("Time to first token distribution in seconds."), EPPTTFTBuckets, with("streaming")...),
		tpot:          telemetry.NewHistogramVec(EPPPrefix+"request_streaming_tpot_seconds", help("Time per output token of streamed requests, in seconds."), EPPTPOTBuckets, l...),
	}
	if reg != nil {
		reg.MustRegister(o.requests, o.errors, o.duration, o.requestSizes, o.responseSizes, o.inputTokens,
			o.outputTokens, o.cachedTokens, o.running, o.normalizedTPOT, o.ttft, o.tpot,
			o.epp.requests, o.epp.errors, o.epp.duration, o.epp.requestSizes, o.epp.responseSizes, o.epp.inputTokens,
			o.epp.outputTokens, o.epp.cachedTokens, o.epp.running, o.epp.ntpot, o.epp.ttft, o.epp.tpot)
	}
	return o
}

// labels are a request's bounded label values: model (also the target
// model), fairness id, priority.
func (o *Objective) labels(l Labels) (model, flow, priority string) {
	return o.models.Value(l.Model), o.flows.Value(l.FairnessID), o.priorities.Value(strconv.Itoa(l.Priority))
}

// Started counts a request sent to a model server (after it was routed):
// its size, and one more running.
func (o *Objective) Started(l Labels, requestBytes int) {
	if o == nil {
		return
	}
	model, flow, priority := o.labels(l)
	o.requests.WithLabelValues(model, model, priority).Inc()
	o.requestSizes.WithLabelValues(model, model).Observe(float64(requestBytes))
	o.epp.requests.WithLabelValues(model, model, flow, priority).Inc()
	o.epp.requestSizes.WithLabelValues(model, model, flow, priority).Observe(float64(requestBytes))
	o.epp.running.WithLabelValues(model, model, flow, priority).Inc()
	if model != "" {
		o.running.WithLabelValues(model).Inc()
	}
}

// Refused counts a request that ended before it was sent (a bad body, a
// pick that failed, flow control), with the code of its answer.
func (o *Objective) Refused(l Labels, errorCode string) {
	if o == nil {
		return
	}
	model, flow, priority := o.labels(l)
	o.errors.WithLabelValues(model, model, errorCode).Inc()
	o.epp.errors.WithLabelValues(model, model, flow, priority, errorCode).Inc()
}

// Finished observes a started request's end from its completion event and
// the bytes of its answer: one fewer running, its latency, its size, its
// tokens, and an error when the model server answered one or the request
// failed on its way. l must be what Started was given.
func (o *Objective) Finished(l Labels, ev *eventsv1.RequestCompleted, responseBytes int) {
	if o == nil {
		return
	}
	model, flow, priority := o.labels(l)
	epp := []string{model, model, flow, priority}
	if model != "" {
		o.running.WithLabelValues(model).Dec()
	}
	o.epp.running.WithLabelValues(epp...).Dec()
	code := ""
	switch ev.GetOutcome() {
	case eventsv1.CompletionOutcome_COMPLETION_OUTCOME_UPSTREAM_ERROR:
		code = ErrorModelServer
	case eventsv1.CompletionOutcome_COMPLETION_OUTCOME_FAILED:
		code = ErrorCode(int(ev.GetStatusCode()), false)
	}
	if code != "" {
		o.errors.WithLabelValues(model, model, code).Inc()
		o.epp.errors.WithLabelValues(model, model, flow, priority, code).Inc()
	}
	d := ev.GetDuration().AsDuration().Seconds()
	if d > 0 {
		o.duration.WithLabelValues(model, model).Observe(d)
		o.epp.duration.WithLabelValues(epp...).Observe(d)
	}
	o.responseSizes.WithLabelValues(model, model).Observe(float64(responseBytes))
	o.epp.responseSizes.WithLabelValues(epp...).Observe(float64(responseBytes))
	if p := ev.GetPromptTokens(); p > 0 {
		o.inputTokens.WithLabelValues(model, model).Observe(float64(p))
		o.cachedTokens.WithLabelValues(model, model).Observe(float64(ev.GetCachedTokens()))
		o.epp.inputTokens.WithLabelValues(epp...).Observe(float64(p))
		o.epp.cachedTokens.WithLabelValues(epp...).Observe(float64(ev.GetCachedTokens()))
	}
	if c := ev.GetCompletionTokens(); c > 0 {
		o.outputTokens.WithLabelValues(model, model).Observe(float64(c))
		o.epp.outputTokens.WithLabelValues(epp...).Observe(float64(c))
		if d > 0 {
			o.normalizedTPOT.WithLabelValues(model, model).Observe(d / float64(c))
			o.epp.ntpot.WithLabelValues(epp...).Observe(d / float64(c))
		}
	}
	if t := ev.GetTtft().AsDuration().Seconds(); t > 0 {
		o.ttft.WithLabelValues(model, model).Observe(t)
		o.epp.ttft.WithLabelValues(model, model, flow, priority, strconv.FormatBool(ev.GetStreamed())).Observe(t)
	}
	if t := ev.GetTpot().AsDuration().Seconds(); t > 0 {
		o.tpot.WithLabelValues(model, model).Observe(t)
		if ev.GetStreamed() {
			o.epp.tpot.WithLabelValues(epp...).Observe(t)
		}
	}
}
