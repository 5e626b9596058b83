package extproc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	pickerv1 "github.com/hermod/hermod/libs/api/hermod/picker/v1"
	"github.com/hermod/hermod/libs/giemetrics"
	"github.com/hermod/hermod/libs/openai"
	"github.com/hermod/hermod/libs/requestid"
	"github.com/hermod/hermod/libs/reservedheaders"
	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/libs/telemetry"
)

// exchange is the state of one ext_proc stream: one HTTP request and its
// response. Only the stream's goroutine touches it.
type exchange struct {
	s      *Server
	stream extprocv3.ExternalProcessor_ProcessServer
	ctx    context.Context

	reqMode, respMode filterv3.ProcessingMode_BodySendMode
	// waitsForHeaders: the data plane sends no body before the headers
	// are answered (STREAMED without
	// send_body_without_waiting_for_header_response).
	waitsForHeaders bool

	// the request
	headersSeen bool
	passthrough bool
	api         openai.API
	headers     map[string]string
	requestID   string
	newID       bool // the id was made here: set on the request and the response
	subset      []string
	subsetSet   bool
	body        []byte
	bodyMsgs    int // body messages received (STREAMED answers each)

	// the decision
	pick      *pickerv1.PickResponse
	served    *pickerv1.Target
	pickedAt  time.Time
	model     string
	streamReq bool
	// promptTokenIDs: the prompt's length when it came as token ids
	promptTokenIDs int

	// the response
	status int
	acct   *openai.Accountant
	// answerBytes counts the response body passed to the client.
	answerBytes int
	completed   bool

	// outcome labels the stream in the metrics once it is known.
	outcome string
}

// handle answers one message of the data plane.
func (x *exchange) handle(req *extprocv3.ProcessingRequest) error {
	switch r := req.GetRequest().(type) {
	case *extprocv3.ProcessingRequest_RequestHeaders:
		return x.requestHeaders(req, r.RequestHeaders)
	case *extprocv3.ProcessingRequest_RequestBody:
		return x.requestBody(r.RequestBody)
	case *extprocv3.ProcessingRequest_RequestTrailers:
		return x.requestTrailers()
	case *extprocv3.ProcessingRequest_ResponseHeaders:
		return x.responseHeaders(req, r.ResponseHeaders)
	case *extprocv3.ProcessingRequest_ResponseBody:
		return x.responseBody(req, r.ResponseBody)
	case *extprocv3.ProcessingRequest_ResponseTrailers:
		return x.responseTrailers(req)
	}
	return nil // a flow-control update alone: nothing to answer
}

func (x *exchange) requestHeaders(req *extprocv3.ProcessingRequest, h *extprocv3.HttpHeaders) error {
	if x.headersSeen {
		return x.protocolError("request headers sent twice")
	}
	x.headersSeen = true
	if pc := req.GetProtocolConfig(); pc != nil {
		x.reqMode, x.respMode = pc.GetRequestBodyMode(), pc.GetResponseBodyMode()
		x.waitsForHeaders = !pc.GetSendBodyWithoutWaitingForHeaderResponse()
	}
	x.headers = headerMap(h.GetHeaders())
	x.requestID = x.headers[RequestIDHeader]
	if !requestid.Valid(x.requestID) {
		x.requestID, x.newID = requestid.New(), true
	}
	api, ok := openai.APIOfPath(x.headers[":path"])
	if !ok {
		x.passthrough, x.outcome = true, outcomePassthrough
		return x.send(headersResponse(true, x.stripReserved()))
	}
	x.api = api
	if h.GetEndOfStream() {
		return x.reject(refusal(http.StatusBadRequest, "the request has no body: "+x.headers[":path"]+" takes a JSON body", "hermod_body_missing", 0))
	}
	x.subset, x.subsetSet = subsetHint(req.GetMetadataContext(), x.headers)
	// a declared length sizes the buffer up to 64 KiB, never further: it
	// grows with the bytes that arrive
	if n, err := strconv.ParseInt(x.headers["content-length"], 10, 64); err == nil && n > 0 && n <= x.s.o.MaxBodyBytes {
		x.body = make([]byte, 0, min(n, 64<<10))
	}
	switch x.reqMode {
	case filterv3.ProcessingMode_FULL_DUPLEX_STREAMED:
		return nil // answered once the body is in
	case filterv3.ProcessingMode_STREAMED:
		if !x.waitsForHeaders {
			return nil
		}
	case filterv3.ProcessingMode_BUFFERED, filterv3.ProcessingMode_BUFFERED_PARTIAL:
		return x.send(headersResponse(true, x.stripReserved()))
	}
	x.s.log.Warn("ext_proc: this filter configuration cannot route on the request body",
		"request_body_mode", x.reqMode.String(), "send_body_without_waiting_for_header_response", !x.waitsForHeaders)
	return x.reject(refusal(http.StatusInternalServerError,
		fmt.Sprintf("the picker needs the request body: configure the ext_proc filter with request_body_mode FULL_DUPLEX_STREAMED or BUFFERED (it is %s)", x.reqMode),
		"hermod_extproc_misconfigured", 0))
}

// stripReserved removes the routing headers only Hermod sets that the
// client sent itself (reservedheaders), whatever the request is.
func (x *exchange) stripReserved() *extprocv3.HeaderMutation {
	names := reservedheaders.In(x.headers)
	if len(names) == 0 {
		return nil
	}
	return &extprocv3.HeaderMutation{RemoveHeaders: names}
}

func (x *exchange) requestBody(b *extprocv3.HttpBody) error {
	if !x.headersSeen {
		return x.protocolError("request body before the request headers")
	}
	if x.passthrough || x.pick != nil {
		return x.continueBody(true, x.reqMode, b)
	}
	if int64(len(x.body))+int64(len(b.GetBody())) > x.s.o.MaxBodyBytes {
		return x.reject(refusal(http.StatusRequestEntityTooLarge,
			fmt.Sprintf("request body is larger than %d bytes", x.s.o.MaxBodyBytes), "hermod_body_too_large", 0))
	}
	x.body = append(x.body, b.GetBody()...)
	x.bodyMsgs++
	switch x.reqMode {
	case filterv3.ProcessingMode_BUFFERED, filterv3.ProcessingMode_BUFFERED_PARTIAL:
		return x.route(true) // the whole body in one message
	}
	if b.GetEndOfStream() {
		return x.route(true)
	}
	return nil
}

func (x *exchange) requestTrailers() error {
	if !x.headersSeen {
		return x.protocolError("request trailers before the request headers")
	}
	if !x.passthrough && x.pick == nil {
		// The trailers say the body is complete.
		if x.bodyMsgs == 0 {
			return x.reject(refusal(http.StatusBadRequest, "the request has no body: "+x.headers[":path"]+" takes a JSON body", "hermod_body_missing", 0))
		}
		if err := x.route(false); err != nil {
			return err
		}
	}
	return x.send(&extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestTrailers{RequestTrailers: &extprocv3.TrailersResponse{}}})
}

// route picks the request's endpoints and sends the routing answer as
// the request's body mode wants it. eos says the body ended with its last
// chunk (false: with trailers, answered after).
func (x *exchange) route(eos bool) error {
	start := time.Now()
	if x.subsetSet && len(x.subset) == 0 {
		return x.reject(refusal(http.StatusServiceUnavailable, "no endpoint available: the subset hint names no endpoint", "hermod_empty_subset", 1))
	}
	body, err := openai.ParseRequest(x.api, x.headers["content-type"], x.body)
	if err != nil {
		var be *openai.BodyError
		errors.As(err, &be)
		return x.reject(openai.Rejection{Error: *openai.BodyErrorResponse(be), Details: "hermod_bad_request"})
	}
	x.model, x.streamReq, x.promptTokenIDs = body.Model, body.Stream, len(body.TokenIDs)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(x.ctx), x.s.o.PickTimeout)
	out, err := x.s.o.Picker.Pick(ctx, &pickerv1.PickRequest{RequestId: x.requestID, Api: x.api.PickAPI(), Request: body.Proto(),
		Headers: pickHeaders(x.headers, x.requestID), Subset: x.subset})
	cancel()
	if err != nil {
		rej := openai.PickRejection(err, false)
		if rej.Status == http.StatusInternalServerError {
			// a plugin's failure: the detail is for the log, as the
			// gateway keeps it
			x.s.log.Warn("ext_proc: pick failed", "request_id", x.requestID, "error", err)
			rej.Message = "routing the request failed (request id " + x.requestID + ")"
		}
		return x.reject(rej)
	}
	x.pick, x.pickedAt = out, time.Now()
	x.s.m.objective.Started(x.labels(), len(x.body))
	if len(out.GetTargets()) == 0 {
		x.complete(eventsv1.CompletionOutcome_COMPLETION_OUTCOME_FAILED, "the picker chose no endpoint")
		return x.reject(refusal(http.StatusServiceUnavailable, "no endpoint available: the picker chose none", "hermod_no_target", 1))
	}
	x.served = out.GetTargets()[0]
	if x.s.verbose {
		x.s.log.LogAttrs(x.ctx, telemetry.LevelRequest, "ext_proc request routed", slog.String("request_id", x.requestID),
			slog.String("decision_id", out.GetDecisionId()), slog.String("destination", x.destination()),
			slog.Int("body_bytes", len(x.body)), slog.String("mode", x.reqMode.String()))
	}
	err = x.sendRoute(eos)
	x.s.m.route.Observe(time.Since(start).Seconds())
	return err
}

func (x *exchange) sendRoute(eos bool) error {
	dest := x.destination()
	switch x.reqMode {
	case filterv3.ProcessingMode_BUFFERED, filterv3.ProcessingMode_BUFFERED_PARTIAL:
		resp := bodyResponse(true, &extprocv3.CommonResponse{HeaderMutation: x.routeMutation(false), ClearRouteCache: true})
		resp.DynamicMetadata = destinationMetadata(dest)
		return x.send(resp)
	case filterv3.ProcessingMode_STREAMED:
		resp := headersResponse(true, x.routeMutation(false))
		resp.GetRequestHeaders().GetResponse().ClearRouteCache = true
		resp.DynamicMetadata = destinationMetadata(dest)
		if err := x.send(resp); err != nil {
			return err
		}
		for range x.bodyMsgs {
			if err := x.send(bodyResponse(true, nil)); err != nil {
				return err
			}
		}
		return nil
	}
	// FULL_DUPLEX_STREAMED: the body comes back as it is, in chunks, so
	// its length is the one the client sent (the filter drops
	// content-length unless allow_content_length_header is set).
	resp := headersResponse(true, x.routeMutation(true))
	resp.GetRequestHeaders().GetResponse().ClearRouteCache = true
	resp.DynamicMetadata = destinationMetadata(dest)
	if err := x.send(resp); err != nil {
		return err
	}
	return x.sendChunks(true, x.body, eos, nil)
}

// destination is the routing header's value: every target, primary first.
func (x *exchange) destination() string {
	var b strings.Builder
	for _, t := range x.pick.GetTargets() {
		if t.GetAddress() == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(t.GetAddress())
	}
	return b.String()
}

// routeMutation is the request header mutation of a decision: the pick's
// headers removed and set, the routing header, the request id when it was
// made here, and the body's length when asked. The client's copies of
// every reserved routing header are removed first (Envoy applies the
// removals before the sets).
func (x *exchange) routeMutation(withLength bool) *extprocv3.HeaderMutation {
	m := &extprocv3.HeaderMutation{RemoveHeaders: reservedheaders.In(x.headers)}
	for _, name := range x.pick.GetRemoveHeaders() {
		if name = strings.ToLower(name); !slices.Contains(m.RemoveHeaders, name) {
			m.RemoveHeaders = append(m.RemoveHeaders, name)
		}
	}
	m.SetHeaders = sortedHeaders(x.pick.GetHeaders())
	m.SetHeaders = append(m.SetHeaders, setHeader(DestinationHeader, x.destination()))
	if x.newID {
		m.SetHeaders = append(m.SetHeaders, setHeader(RequestIDHeader, x.requestID))
	}
	if withLength {
		m.SetHeaders = append(m.SetHeaders, setHeader("content-length", strconv.Itoa(len(x.body))))
	}
	return m
}

// sortedHeaders returns set mutations of h in name order.
func sortedHeaders(h map[string]string) []*corev3.HeaderValueOption {
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]*corev3.HeaderValueOption, 0, len(keys)+3)
	for _, k := range keys {
		out = append(out, setHeader(strings.ToLower(k), h[k]))
	}
	return out
}

func (x *exchange) responseHeaders(req *extprocv3.ProcessingRequest, h *extprocv3.HttpHeaders) error {
	if x.pick == nil || x.completed {
		return x.send(headersResponse(false, nil)) // not routed here: pass it on
	}
	hs := headerMap(h.GetHeaders())
	x.status, _ = strconv.Atoi(hs[":status"])
	x.acct = openai.NewAccountantFor(x.api, strings.HasPrefix(strings.ToLower(hs["content-type"]), "text/event-stream"), false)
	x.noteServed(req)
	m := &extprocv3.HeaderMutation{SetHeaders: sortedHeaders(x.served.GetResponseHeaders())}
	m.SetHeaders = append(m.SetHeaders, x.verifyServed(req)...)
	if x.newID {
		m.SetHeaders = append(m.SetHeaders, setHeader(RequestIDHeader, x.requestID))
	}
	if err := x.send(headersResponse(false, m)); err != nil {
		return err
	}
	if h.GetEndOfStream() {
		x.completeByStatus()
	}
	return nil
}

func (x *exchange) responseBody(req *extprocv3.ProcessingRequest, b *extprocv3.HttpBody) error {
	followed := x.pick != nil && !x.completed
	if followed {
		if x.acct == nil { // response headers not sent to the picker
			x.acct = openai.NewAccountantFor(x.api, false, false)
		}
		x.acct.Feed(b.GetBody())
		x.answerBytes += len(b.GetBody())
		x.noteServed(req)
	}
	var md *structpb.Struct
	if followed && b.GetEndOfStream() {
		md = x.attributes()
	}
	if err := x.continueBodyWith(false, x.respMode, b, md); err != nil {
		return err
	}
	if followed && b.GetEndOfStream() {
		x.completeByStatus()
	}
	return nil
}

// attributes returns the dynamic metadata the finished response reports
// (nil: none), from the usage it carried.
func (x *exchange) attributes() *structpb.Struct {
	if x.s.o.Attributes == nil || x.acct == nil {
		return nil
	}
	x.acct.Finish()
	seen := x.acct.Observed()
	if !seen.HaveUsage {
		return nil
	}
	u := seen.Usage
	attrs := x.s.o.Attributes(scheduling.Usage{PromptTokens: int(u.PromptTokens), CachedTokens: int(u.CachedTokens), CompletionTokens: int(u.CompletionTokens)})
	return attributesMetadata(attrs)
}

func (x *exchange) responseTrailers(req *extprocv3.ProcessingRequest) error {
	if err := x.send(&extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseTrailers{ResponseTrailers: &extprocv3.TrailersResponse{}}}); err != nil {
		return err
	}
	if x.pick != nil && !x.completed {
		x.noteServed(req)
		x.completeByStatus()
	}
	return nil
}

// noteServed takes the endpoint that served from the data plane's word,
// when it names one of the decision's targets (a fallback, say).
func (x *exchange) noteServed(req *extprocv3.ProcessingRequest) {
	addr := servedAddress(req)
	if addr == "" || addr == x.served.GetAddress() {
		return
	}
	for _, t := range x.pick.GetTargets() {
		if t.GetAddress() == addr {
			x.served = t
			return
		}
	}
}

// continueBody passes a body chunk on unchanged: echoed in the streamed
// modes, a plain CONTINUE otherwise.
func (x *exchange) continueBody(request bool, mode filterv3.ProcessingMode_BodySendMode, b *extprocv3.HttpBody) error {
	return x.continueBodyWith(request, mode, b, nil)
}

// continueBodyWith is continueBody with dynamic metadata (nil: none) on
// the last message it sends.
func (x *exchange) continueBodyWith(request bool, mode filterv3.ProcessingMode_BodySendMode, b *extprocv3.HttpBody, md *structpb.Struct) error {
	switch mode {
	case filterv3.ProcessingMode_FULL_DUPLEX_STREAMED, filterv3.ProcessingMode_GRPC:
		return x.sendChunks(request, b.GetBody(), b.GetEndOfStream(), md)
	}
	resp := bodyResponse(request, nil)
	resp.DynamicMetadata = md
	return x.send(resp)
}

// sendChunks streams body back in chunks of at most MaxChunkSize bytes,
// the last one carrying eos and md (nil: none).
func (x *exchange) sendChunks(request bool, body []byte, eos bool, md *structpb.Struct) error {
	for {
		n := min(len(body), MaxChunkSize)
		last := n == len(body)
		resp := bodyResponse(request, &extprocv3.CommonResponse{BodyMutation: &extprocv3.BodyMutation{
			Mutation: &extprocv3.BodyMutation_StreamedResponse{StreamedResponse: &extprocv3.StreamedBodyResponse{Body: body[:n], EndOfStream: last && eos}},
		}})
		if last {
			resp.DynamicMetadata = md
		}
		if err := x.send(resp); err != nil {
			return err
		}
		if last {
			return nil
		}
		body = body[n:]
	}
}

func headersResponse(request bool, m *extprocv3.HeaderMutation) *extprocv3.ProcessingResponse {
	hr := &extprocv3.HeadersResponse{}
	if m != nil {
		hr.Response = &extprocv3.CommonResponse{HeaderMutation: m}
	} else {
		hr.Response = &extprocv3.CommonResponse{}
	}
	if request {
		return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestHeaders{RequestHeaders: hr}}
	}
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseHeaders{ResponseHeaders: hr}}
}

func bodyResponse(request bool, c *extprocv3.CommonResponse) *extprocv3.ProcessingResponse {
	br := &extprocv3.BodyResponse{Response: c}
	if request {
		return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestBody{RequestBody: br}}
	}
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseBody{ResponseBody: br}}
}

func (x *exchange) send(resp *extprocv3.ProcessingResponse) error {
	if err := x.stream.Send(resp); err != nil {
		return fmt.Errorf("send to the data plane: %w", err)
	}
	return nil
}

// reject answers the request with an error of its own and ends the
// stream.
func (x *exchange) reject(r openai.Rejection) error {
	r.Anthropic = x.api.Anthropic()
	x.outcome = outcomeImmediate
	x.s.m.immediateResponse(r.Status)
	if x.pick == nil {
		x.s.m.objective.Refused(x.labels(), giemetrics.ErrorCode(r.Status, false))
	}
	if x.s.verbose {
		x.s.log.LogAttrs(x.ctx, telemetry.LevelRequest, "ext_proc request answered by the picker", slog.String("request_id", x.requestID),
			slog.Int("status", r.Status), slog.String("reason", r.Details), slog.String("error", r.Message))
	}
	if err := x.send(immediateResponse(r, x.requestID)); err != nil {
		return err
	}
	return errAnswered
}

// protocolError ends a stream whose data plane broke the protocol.
func (x *exchange) protocolError(what string) error {
	x.outcome = outcomeProtocolError
	x.s.log.Warn("ext_proc: the data plane broke the protocol", "request_id", x.requestID, "error", what)
	return status.Error(codes.FailedPrecondition, "ext_proc protocol: "+what)
}

// finish ends the stream's accounting: a routed request not completed yet
// is completed by how the stream ended (err nil: the data plane closed
// it).
func (x *exchange) finish(err error) {
	if x.pick != nil && !x.completed {
		switch {
		case x.respMode == filterv3.ProcessingMode_NONE && x.status != 0:
			// The body is not sent here: the stream's end is the response's.
			x.completeByStatus()
		case err == nil:
			x.complete(eventsv1.CompletionOutcome_COMPLETION_OUTCOME_CANCELED, "the data plane closed the stream before the response ended")
		case x.ctx.Err() != nil || status.Code(err) == codes.Canceled:
			x.complete(eventsv1.CompletionOutcome_COMPLETION_OUTCOME_CANCELED, "the client or the data plane went away before the response ended")
		default:
			x.s.log.Warn("ext_proc stream of a routed request broke", "request_id", x.requestID, "error", err)
			x.complete(eventsv1.CompletionOutcome_COMPLETION_OUTCOME_FAILED, err.Error())
		}
	}
	if x.outcome == "" {
		x.outcome = outcomeAbandoned
	}
	x.s.m.streams.WithLabelValues(x.outcome).Inc()
}

// completeByStatus completes a response that ended: a success for a 2xx
// status (or an unknown one: the response headers were not sent here).
func (x *exchange) completeByStatus() {
	if x.status == 0 || (x.status >= 200 && x.status < 300) {
		x.complete(eventsv1.CompletionOutcome_COMPLETION_OUTCOME_SUCCESS, "")
		return
	}
	x.complete(eventsv1.CompletionOutcome_COMPLETION_OUTCOME_UPSTREAM_ERROR, fmt.Sprintf("endpoint answered %d", x.status))
}

// complete reports the routed request's end, once.
func (x *exchange) complete(outcome eventsv1.CompletionOutcome, why string) {
	if x.completed || x.pick == nil {
		return
	}
	x.completed = true
	end := time.Now()
	ev := &eventsv1.RequestCompleted{
		DecisionId:   x.pick.GetDecisionId(),
		RequestId:    x.requestID,
		Pool:         x.s.o.Pool,
		Model:        x.model,
		Endpoint:     x.served.GetAddress(),
		EndpointName: x.served.GetName(),
		Time:         timestamppb.New(end),
		Outcome:      outcome,
		StatusCode:   int32(x.status),
		Error:        why,
		Streamed:     x.streamReq,
		Attempts:     1,
		Reporter:     x.s.o.Replica,
	}
	if outcome == eventsv1.CompletionOutcome_COMPLETION_OUTCOME_CANCELED {
		ev.StatusCode = 0 // the client got no whole answer
	}
	obs := openai.Observation{PickedAt: x.pickedAt, End: end, Streamed: x.streamReq, PromptTokenIDs: x.promptTokenIDs}
	if x.acct != nil {
		x.acct.Finish()
		obs.Observed = x.acct.Observed()
	}
	obs.Fill(ev)
	x.s.m.objective.Finished(x.labels(), ev, x.answerBytes)
	x.s.o.Completer.Complete(context.WithoutCancel(x.ctx), ev)
	x.outcome = openai.OutcomeLabel(outcome)
	if x.s.verbose {
		x.s.log.LogAttrs(x.ctx, telemetry.LevelRequest, "ext_proc request completed", slog.String("request_id", x.requestID),
			slog.String("decision_id", ev.GetDecisionId()), slog.String("endpoint", ev.GetEndpoint()), slog.Int("status", x.status),
			slog.String("outcome", outcome.String()), slog.Duration("duration", end.Sub(x.pickedAt)))
	}
}
