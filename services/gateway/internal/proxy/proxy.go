// Package proxy is the gateway's request path: it reads and checks an
// OpenAI request, asks the picker where it goes, forwards it (streaming
// responses pass through event by event), falls back to the next endpoint
// when one fails before answering, and reports the request's completion
// exactly once, however it ends.
package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	pickerv1 "github.com/hermod/hermod/libs/api/hermod/picker/v1"
	"github.com/hermod/hermod/libs/giemetrics"
	"github.com/hermod/hermod/libs/openai"
	"github.com/hermod/hermod/libs/requestid"
	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/libs/telemetry"
	"github.com/hermod/hermod/services/gateway/internal/flowcontrol"
	"github.com/hermod/hermod/services/gateway/internal/pickerclient"
	"github.com/hermod/hermod/services/gateway/internal/reqbody"
)

// Defaults of Options.
const (
	DefaultMaxBodyBytes    = 16 << 20
	DefaultMaxAttempts     = 3
	DefaultBodyReadTimeout = time.Minute
)

// Picker decides where requests go (pickerclient.Client).
type Picker interface {
	Pick(ctx context.Context, req *pickerv1.PickRequest) (pickerclient.Decision, error)
}

// Reporter takes the events of a request (report.Reporter); none of its
// methods may block.
type Reporter interface {
	// PublishesDecisions says whether Decided publishes the decision
	// events pickers hand over: then every Pick asks for them.
	PublishesDecisions() bool
	// Decided takes a Pick's answer as soon as it came.
	Decided(d pickerclient.Decision)
	// Report takes the request's completion.
	Report(d pickerclient.Decision, ev *eventsv1.RequestCompleted)
}

// Options configure a Handler.
type Options struct {
	Pool     string
	Replica  string
	Picker   Picker
	Reporter Reporter
	// Transport sends requests to endpoints (default: a tuned
	// http.Transport).
	Transport http.RoundTripper
	// MaxBodyBytes bounds request bodies (default DefaultMaxBodyBytes).
	MaxBodyBytes int64
	// BodyReadTimeout bounds reading a request body (default
	// DefaultBodyReadTimeout), so that a client trickling its body does
	// not hold a request open.
	BodyReadTimeout time.Duration
	// MaxAttempts bounds the endpoints tried per request (default
	// DefaultMaxAttempts).
	MaxAttempts int
	// ForwardHeaders names request headers that are for the gateway's
	// hop and not forwarded to model servers unless named here (Cookie,
	// Proxy-*; see CheckForwardHeaders). Reserved routing headers are
	// never forwarded from a client, whatever this says.
	ForwardHeaders []string
	// Flow, when set, admits requests before they are picked (shedding,
	// queueing by priority); nil admits every request.
	Flow    *Flow
	Logger  *slog.Logger
	Metrics *Metrics
}

// Flow is the gateway's flow control: the controller and how requests
// are classified.
type Flow struct {
	Controller *flowcontrol.Controller
	Settings   flowcontrol.Settings
	// Retain keeps the saturation rule to the registered endpoints (nil:
	// metrics alone decide).
	Retain func(names map[string]bool)
}

// Handler serves /v1/completions, /v1/chat/completions and Anthropic's
// /v1/messages (and its count_tokens).
type Handler struct {
	o         Options
	log       *slog.Logger
	m         *Metrics
	verbose   bool
	bufs      sync.Pool
	forwarded map[string]bool // canonical names
}

// New returns a Handler.
func New(o Options) *Handler {
	if o.Transport == nil {
		o.Transport = NewTransport(false, 0)
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.BodyReadTimeout <= 0 {
		o.BodyReadTimeout = DefaultBodyReadTimeout
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = DefaultMaxAttempts
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Metrics == nil {
		o.Metrics = NewMetrics(nil)
	}
	h := &Handler{o: o, log: o.Logger, m: o.Metrics, verbose: o.Logger.Enabled(context.Background(), telemetry.LevelRequest), forwarded: map[string]bool{}}
	for _, name := range o.ForwardHeaders {
		h.forwarded[http.CanonicalHeaderKey(name)] = true
	}
	h.bufs.New = func() any { b := make([]byte, 32<<10); return &b }
	return h
}

// Completions returns the handler of one API.
func (h *Handler) Completions(api openai.API) http.Handler {
	am := h.m.forAPI(api.String())
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.serve(w, r, api, am) })
}

// request is the state of one request on its way through.
type request struct {
	api openai.API
	// lease is the request's hold on flow control (nil without it): its
	// context ends when flow control evicts the request
	lease    *flowcontrol.Lease
	id       string
	m        *apiMetrics
	start    time.Time
	info     openai.Request
	decision pickerclient.Decision
	// outcome, filled as the request goes
	status     int
	outcome    eventsv1.CompletionOutcome
	err        string
	endpoint   *pickerv1.Target
	attempts   int
	firstByte  time.Time // when the endpoint's answer began
	seen       openai.Observed
	pickedAt   time.Time
	clientGone bool
	// keepable: flow control classified the request as not sheddable
	// (priority >= 0): when the picker sheds it, it is refused with 503
	// to retry, not 429
	keepable bool
	// priority and flow are flow control's classification (classified:
	// it ran)
	priority   int
	flow       string
	classified bool
	// started: the request was routed and counted as started in the
	// objective metrics; bodyBytes and answerBytes are the sizes of the
	// request body and of the answer passed to the client.
	started     bool
	bodyBytes   int
	answerBytes int
}

func (h *Handler) serve(w http.ResponseWriter, r *http.Request, api openai.API, am *apiMetrics) {
	req := &request{api: api, id: r.Header.Get(RequestIDHeader), m: am, start: time.Now()}
	if !requestid.Valid(req.id) { // not behind RequestIDs
		req.id = requestid.New()
		r.Header.Set(RequestIDHeader, req.id)
	}
	w.Header().Set(RequestIDHeader, req.id)
	h.m.inflight.Inc()
	defer h.m.inflight.Dec()

	body, err := reqbody.Read(w, r, h.o.MaxBodyBytes, h.o.BodyReadTimeout)
	if err != nil {
		h.log.LogAttrs(r.Context(), slog.LevelDebug, "request body refused", slog.String("request_id", req.id), slog.String("error", err.Error()))
		h.answer(w, req, reqbody.Answer(err, h.o.MaxBodyBytes))
		return
	}
	info, err := openai.ParseRequest(api, r.Header.Get("Content-Type"), body)
	if err != nil {
		var be *openai.BodyError
		errors.As(err, &be)
		h.answer(w, req, openai.BodyErrorResponse(be))
		return
	}
	req.info, req.bodyBytes = info, len(body)
	if f := h.o.Flow; f != nil {
		if !h.admit(w, r, req, f) {
			return
		}
		// the work admitted runs under the lease: evicted, it ends
		r = r.WithContext(req.lease.Context())
		defer func() {
			// a program-aware band credits the tokens to the flow
			u := req.seen.Usage
			req.lease.Release(u.PromptTokens, u.CompletionTokens)
		}()
	}

	// The pick is not canceled with the client: a decision taken after the
	// client left is completed (as canceled) like any other, so that its
	// in-flight count drops. The picker client bounds the call.
	pickStart := time.Now()
	ph := pickHeaders(r.Header)
	if req.classified {
		// the picker's plugins (predicted-latency-scorer sheds only
		// sheddable requests) see the priority an objective resolved to
		ph[PriorityHeader] = strconv.Itoa(req.priority)
	}
	// The picker gets the body parsed: it is parsed once, here.
	d, err := h.o.Picker.Pick(context.WithoutCancel(r.Context()), &pickerv1.PickRequest{
		Pool: h.o.Pool, RequestId: req.id, Api: api.PickAPI(), Request: info.Proto(), Headers: ph,
		CallerPublishesDecision: h.o.Reporter.PublishesDecisions(),
	})
	req.pickedAt = time.Now()
	h.m.pickDuration.Observe(req.pickedAt.Sub(pickStart).Seconds())
	if err != nil {
		h.pickFailed(w, r, req, err)
		return
	}
	h.o.Reporter.Decided(d)
	req.decision = d
	req.started = true
	h.m.objective.Started(req.labels(r.Header), len(body))
	defer func() {
		if p := recover(); p != nil {
			req.outcome, req.err = eventsv1.CompletionOutcome_COMPLETION_OUTCOME_FAILED, fmt.Sprintf("gateway panic: %v", p)
			h.complete(r.Context(), req)
			panic(p) // the HTTP server logs it and drops the connection
		}
		h.complete(r.Context(), req)
	}()

	upstreamBody := body
	stripUsage := false
	if info.Stream && !info.IncludeUsage && api.Generates() && !api.Anthropic() { // Anthropic's streams carry usage
		if b, err := openai.WithIncludeUsage(body, info); err == nil {
			upstreamBody, stripUsage = b, true
		}
	}
	h.forward(w, r, req, upstreamBody, stripUsage)
}

// forward tries the decision's targets in order until one answers.
func (h *Handler) forward(w http.ResponseWriter, r *http.Request, req *request, body []byte, stripUsage bool) {
	targets := req.decision.GetTargets()
	if len(targets) > h.o.MaxAttempts {
		targets = targets[:h.o.MaxAttempts]
	}
	if len(targets) == 0 {
		h.fail(w, req, http.StatusServiceUnavailable, "", "", "the picker chose no endpoint")
		return
	}
	var lastErr string
	for i, t := range targets {
		req.endpoint = t
		req.attempts = i + 1
		if i > 0 {
			h.m.fallbacks.Inc()
		}
		out, err := h.upstreamRequest(r, req, t, body)
		if err != nil {
			lastErr = err.Error()
			h.m.attempts.WithLabelValues("error").Inc()
			continue
		}
		resp, err := h.o.Transport.RoundTrip(out)
		if err != nil {
			if req.evicted() {
				h.m.attempts.WithLabelValues("canceled").Inc()
				h.answerEvicted(w, req)
				return
			}
			if r.Context().Err() != nil {
				req.clientGone = true
				req.outcome, req.err = eventsv1.CompletionOutcome_COMPLETION_OUTCOME_CANCELED, "client went away before the endpoint answered"
				h.m.attempts.WithLabelValues("canceled").Inc()
				return
			}
			// A connection refused, or reset before any answer (the endpoint
			// died, say): nothing reached the client, the next one may serve
			// it. A non-streamed request whose endpoint died mid-generation
			// is generated again there.
			lastErr = fmt.Sprintf("endpoint %s: %v", t.GetAddress(), err)
			h.m.attempts.WithLabelValues("error").Inc()
			h.log.LogAttrs(r.Context(), slog.LevelWarn, "endpoint failed before answering; trying the next one",
				slog.String("request_id", req.id), slog.String("endpoint", t.GetAddress()), slog.Int("attempt", i+1), slog.String("error", err.Error()))
			continue
		}
		if resp.StatusCode >= 500 && i+1 < len(targets) {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			_ = resp.Body.Close()
			lastErr = fmt.Sprintf("endpoint %s answered %d", t.GetAddress(), resp.StatusCode)
			h.m.attempts.WithLabelValues("status_5xx").Inc()
			h.log.LogAttrs(r.Context(), slog.LevelWarn, "endpoint answered a server error; trying the next one",
				slog.String("request_id", req.id), slog.String("endpoint", t.GetAddress()), slog.Int("status", resp.StatusCode), slog.Int("attempt", i+1))
			continue
		}
		h.m.attempts.WithLabelValues("answered").Inc()
		h.relay(w, r, req, t, resp, stripUsage)
		return
	}
	req.outcome, req.err = eventsv1.CompletionOutcome_COMPLETION_OUTCOME_FAILED, lastErr
	h.log.LogAttrs(r.Context(), slog.LevelWarn, "no endpoint could serve the request", slog.String("request_id", req.id),
		slog.Int("attempts", len(targets)), slog.String("error", lastErr))
	h.fail(w, req, http.StatusBadGateway, "", "", fmt.Sprintf("no endpoint could serve the request (%d tried)", len(targets)))
}

// upstreamRequest builds the request for one target.
func (h *Handler) upstreamRequest(r *http.Request, req *request, t *pickerv1.Target, body []byte) (*http.Request, error) {
	url := "http://" + t.GetAddress() + r.URL.Path
	if r.URL.RawQuery != "" {
		url += "?" + r.URL.RawQuery
	}
	out, err := http.NewRequestWithContext(r.Context(), http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("build the request to %s: %w", t.GetAddress(), err)
	}
	h.upstreamHeaders(out.Header, r.Header)
	// The relay reads the response (SSE events, usage): it must come as is.
	out.Header.Del("Accept-Encoding")
	for _, name := range req.decision.GetRemoveHeaders() {
		out.Header.Del(name)
	}
	for k, v := range req.decision.GetHeaders() {
		out.Header.Set(k, v)
	}
	out.Header.Set(RequestIDHeader, req.id)
	out.ContentLength = int64(len(body))
	out.Header.Set("Content-Length", strconv.Itoa(len(body)))
	return out, nil
}

// relay sends the endpoint's answer to the client.
func (h *Handler) relay(w http.ResponseWriter, r *http.Request, req *request, t *pickerv1.Target, resp *http.Response, stripUsage bool) {
	defer resp.Body.Close()
	req.firstByte = time.Now()
	dst := w.Header()
	copyHeaders(dst, resp.Header)
	for k, v := range t.GetResponseHeaders() {
		dst.Set(k, v)
	}
	dst.Set(RequestIDHeader, req.id)
	streamed := req.info.Stream && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")
	if streamed {
		dst.Del("Content-Length")
	}
	req.status = resp.StatusCode
	w.WriteHeader(resp.StatusCode)

	if streamed {
		// The client has its headers at once, before the first token.
		_ = http.NewResponseController(w).Flush()
	}
	err := h.pass(w, resp.Body, req, openai.NewAccountantFor(req.api, streamed, stripUsage), streamed)
	if streamed && !req.seen.FirstToken.IsZero() {
		req.firstByte = req.seen.FirstToken // a stream's first token is its first event
	}
	switch {
	case err == nil && resp.StatusCode < 400:
		req.outcome = eventsv1.CompletionOutcome_COMPLETION_OUTCOME_SUCCESS
	case err == nil:
		req.outcome = eventsv1.CompletionOutcome_COMPLETION_OUTCOME_UPSTREAM_ERROR
		req.err = fmt.Sprintf("endpoint answered %d", resp.StatusCode)
	case req.evicted():
		req.outcome, req.err = eventsv1.CompletionOutcome_COMPLETION_OUTCOME_FAILED, flowcontrol.ErrEvicted.Error()
	case r.Context().Err() != nil:
		req.clientGone = true
		req.outcome, req.err = eventsv1.CompletionOutcome_COMPLETION_OUTCOME_CANCELED, "client went away during the response"
	default:
		req.outcome, req.err = eventsv1.CompletionOutcome_COMPLETION_OUTCOME_FAILED, "response broke off: "+err.Error()
		h.log.LogAttrs(r.Context(), slog.LevelWarn, "response broke off", slog.String("request_id", req.id),
			slog.String("endpoint", t.GetAddress()), slog.String("error", err.Error()))
	}
}

// pass copies a response to the client through its accountant (a stream
// event by event, each flushed as soon as it is whole). What it saw is
// kept however the response ends.
func (h *Handler) pass(w http.ResponseWriter, body io.Reader, req *request, acct *openai.Accountant, streamed bool) error {
	bufp := h.bufs.Get().(*[]byte)
	defer h.bufs.Put(bufp)
	buf := *bufp
	flush := func() {}
	if f, ok := w.(http.Flusher); ok && streamed {
		flush = f.Flush
	}
	defer func() { req.seen = acct.Observed() }()
	write := func(p []byte) error {
		if len(p) == 0 {
			return nil
		}
		n, err := w.Write(p)
		req.answerBytes += n
		if err != nil {
			return err
		}
		flush()
		return nil
	}
	// a stream that began well must end with [DONE] (an Anthropic one with
	// message_stop); one that breaks off
	// ends with an error event, not with what looks like a short answer
	framed := streamed && req.status < 400 && req.api != openai.APIPassthrough // whose streams' last event is unknown
	for {
		n, err := body.Read(buf)
		if n > 0 {
			if werr := write(acct.Feed(buf[:n])); werr != nil {
				return werr
			}
		}
		if errors.Is(err, io.EOF) {
			tail := acct.Finish()
			if framed && !acct.Observed().Done {
				err = errStreamCut // what Finish left is an incomplete event
			} else {
				if err := write(tail); err != nil {
					return err
				}
				// The client has the whole answer before the completion
				// is reported (the server would flush it only when the
				// handler returns).
				_ = http.NewResponseController(w).Flush()
				return nil
			}
		}
		if err != nil {
			if framed {
				e := streamBroke(req.id, req.api)
				if req.evicted() {
					e = evictedError(req.api)
				}
				_ = write(acct.Broken(e))
			}
			return err
		}
	}
}

// errStreamCut: a stream ended without its last event ([DONE], or an
// Anthropic stream's message_stop).
var errStreamCut = errors.New("the stream ended without its last event")

// streamBroke is the error event that ends a stream whose model server
// failed during it: the API's error shape, no internal address.
func streamBroke(requestID string, api openai.API) *openai.Error {
	return &openai.Error{Status: http.StatusBadGateway, Type: openai.TypeServer, Code: "stream_interrupted", Anthropic: api.Anthropic(),
		Message: "the model server stopped before the response was complete (request id " + requestID + ")"}
}

// complete reports the request's end, once. ctx is the request's: its log
// line carries the request's trace id.
func (h *Handler) complete(ctx context.Context, req *request) {
	end := time.Now()
	ev := &eventsv1.RequestCompleted{
		DecisionId: req.decision.GetDecisionId(),
		RequestId:  req.id,
		Pool:       h.o.Pool,
		Model:      req.info.Model,
		Outcome:    req.outcome,
		StatusCode: int32(req.status),
		Error:      req.err,
		Streamed:   req.info.Stream,
		Attempts:   int32(req.attempts),
		Reporter:   h.o.Replica,
		Time:       timestamppb.New(end),
	}
	if ev.Outcome == eventsv1.CompletionOutcome_COMPLETION_OUTCOME_UNSPECIFIED {
		ev.Outcome = eventsv1.CompletionOutcome_COMPLETION_OUTCOME_FAILED
	}
	if req.clientGone {
		ev.StatusCode = 0
	}
	if t := req.endpoint; t != nil {
		ev.Endpoint, ev.EndpointName = t.GetAddress(), t.GetName()
	}
	obs := openai.Observation{PickedAt: req.pickedAt, End: end, Streamed: req.info.Stream, PromptTokenIDs: len(req.info.TokenIDs), Observed: req.seen}
	obs.FirstToken = req.firstByte
	obs.Fill(ev)
	req.m.observe(req, end, ev)
	h.m.objective.Finished(req.labels(nil), ev, req.answerBytes)
	h.m.outcomes.WithLabelValues(openai.OutcomeLabel(ev.GetOutcome())).Inc()
	h.o.Reporter.Report(req.decision, ev)
	if h.verbose {
		h.log.LogAttrs(ctx, telemetry.LevelRequest, "request completed", slog.String("request_id", req.id),
			slog.String("decision_id", ev.GetDecisionId()), slog.String("endpoint", ev.GetEndpoint()), slog.Int("status", req.status),
			slog.String("outcome", ev.GetOutcome().String()), slog.Duration("duration", end.Sub(req.start)))
	}
}

// pickFailed answers a request the picker could not place.
func (h *Handler) pickFailed(w http.ResponseWriter, r *http.Request, req *request, err error) {
	if req.evicted() {
		h.answerEvicted(w, req)
		return
	}
	if r.Context().Err() != nil {
		req.m.requests.WithLabelValues("499").Inc()
		return // nobody to answer
	}
	rej := openai.PickRejection(err, req.keepable)
	if !pickerAnswered(err) {
		// the picker could not be asked, or failed: the detail names
		// internal addresses; the client gets the request id
		h.log.LogAttrs(r.Context(), slog.LevelWarn, "pick failed", slog.String("request_id", req.id), slog.String("error", err.Error()))
		rej.Message = "no endpoint could take the request; retry later (request id " + req.id + ")"
		if rej.Status != http.StatusServiceUnavailable {
			rej.Message = "routing the request failed (request id " + req.id + ")"
		}
	}
	h.answer(w, req, &rej.Error)
}

// pickerAnswered reports whether a Pick error is the picker's own
// decision, whose message is for the client: a refused or unroutable
// request, a shed one, a timeout; or a failure the picker gave a reason
// (other than not being ready).
func pickerAnswered(err error) bool {
	switch status.Code(err) {
	case codes.InvalidArgument, codes.NotFound, codes.ResourceExhausted, codes.DeadlineExceeded:
		return true
	}
	reason := pickerclient.FailureReason(err)
	return reason != "" && reason != pickerv1.PickFailure_PICK_FAILURE_NOT_READY.String()
}

// labels are the request's metric labels: its model, and flow control's
// priority and flow, or without flow control the flow its header names
// (h; nil: the one Started saw, kept in req).
func (req *request) labels(h http.Header) giemetrics.Labels {
	if !req.classified && h != nil {
		req.flow = flowcontrol.FairnessID(h)
	}
	return giemetrics.Labels{Model: req.info.Model, Priority: req.priority, FairnessID: req.flow}
}

// admit runs the request through flow control; false when it was
// answered (shed, refused, timed out in the queue, or its client left).
func (h *Handler) admit(w http.ResponseWriter, r *http.Request, req *request, f *Flow) bool {
	prio, flow, err := f.Settings.Classify(r.Header)
	if err != nil {
		h.fail(w, req, http.StatusBadRequest, "", "", err.Error())
		return false
	}
	req.keepable = prio >= 0
	req.priority, req.flow, req.classified = prio, flow, true
	req.lease, err = f.Controller.Admit(r.Context(), flowcontrol.Request{Priority: prio, Flow: flow, Model: req.info.Model, Bytes: req.bodyBytes,
		TTFTSLO: scheduling.SLOMillis(r.Header.Get, scheduling.HeaderSLOTTFT, scheduling.HeaderSLOTTFTLegacy)})
	switch {
	case err == nil:
		return true
	case errors.Is(err, flowcontrol.ErrNoEndpoints):
		// a waiting room for a pool with no endpoint ran out (its TTL,
		// its bound): unavailable, not backpressure
		w.Header().Set(DroppedReasonHeader, DroppedNoEndpoints)
		h.failRetry(w, req, http.StatusServiceUnavailable, "the pool has no endpoints: "+err.Error())
	case errors.Is(err, flowcontrol.ErrShed):
		w.Header().Set(DroppedReasonHeader, DroppedSaturated)
		h.failRetry(w, req, http.StatusTooManyRequests, "the pool is saturated and the request is sheddable")
	case errors.Is(err, flowcontrol.ErrQueueFull):
		w.Header().Set(DroppedReasonHeader, DroppedSaturated)
		h.failRetry(w, req, http.StatusTooManyRequests, err.Error())
	case errors.Is(err, flowcontrol.ErrSaturated):
		w.Header().Set(DroppedReasonHeader, DroppedSaturated)
		h.failRetry(w, req, http.StatusServiceUnavailable, err.Error())
	case errors.Is(err, flowcontrol.ErrTTL):
		w.Header().Set(DroppedReasonHeader, DroppedTTLExpired)
		h.failRetry(w, req, http.StatusTooManyRequests, "the request waited its time to live in the queue")
	default: // the client left while queued
		req.m.requests.WithLabelValues("499").Inc()
	}
	return false
}

// evicted says whether flow control evicted the request to make room for
// requests of higher priority.
func (req *request) evicted() bool { return req.lease != nil && req.lease.Evicted() }

// answerEvicted answers a request flow control evicted before its answer
// began: 429 with x-llm-d-request-dropped-reason: evicted, as llm-d's
// router answers it.
func (h *Handler) answerEvicted(w http.ResponseWriter, req *request) {
	w.Header().Set(DroppedReasonHeader, flowcontrol.DroppedEvicted)
	h.answer(w, req, evictedError(req.api))
}

// evictedError is what an evicted request is told, before its answer or
// as its stream's last event.
func evictedError(api openai.API) *openai.Error {
	return &openai.Error{Status: http.StatusTooManyRequests, Type: openai.TypeRateLimit, Code: "evicted", Anthropic: api.Anthropic(),
		Message: "the request was evicted to make room for requests of higher priority; retry later"}
}

func (h *Handler) failRetry(w http.ResponseWriter, req *request, code int, msg string) {
	h.answer(w, req, &openai.Error{Status: code, Message: msg, RetryAfter: 1})
}

// fail answers an error.
func (h *Handler) fail(w http.ResponseWriter, req *request, code int, errCode, param, msg string) {
	h.answer(w, req, &openai.Error{Status: code, Code: errCode, Param: param, Message: msg})
}

// answer answers an error. A request that was routed counts in its
// completion; one that was not counts here.
func (h *Handler) answer(w http.ResponseWriter, req *request, e *openai.Error) {
	e.Anthropic = req.api.Anthropic()
	req.status = e.Status
	if req.err == "" {
		req.err = e.Message
	}
	if req.outcome == eventsv1.CompletionOutcome_COMPLETION_OUTCOME_UNSPECIFIED {
		req.outcome = eventsv1.CompletionOutcome_COMPLETION_OUTCOME_FAILED
	}
	if req.decision.PickResponse == nil {
		req.m.requests.WithLabelValues(strconv.Itoa(e.Status)).Inc()
	}
	if !req.started {
		h.m.objective.Refused(req.labels(nil), giemetrics.ErrorCode(e.Status, false))
	}
	e.Write(w)
}
