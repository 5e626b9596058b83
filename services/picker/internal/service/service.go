// Package service implements the picker's gRPC PickerService: Pick runs a
// scheduling cycle over the pool's ready endpoints and publishes the
// decision (or hands it to the caller to publish); Complete folds a
// finished request into the projections.
package service

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	pickerv1 "github.com/hermod/hermod/libs/api/hermod/picker/v1"
	"github.com/hermod/hermod/libs/openai"
	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/libs/scheduling/decisions"
	"github.com/hermod/hermod/libs/telemetry"
	"github.com/hermod/hermod/services/picker/internal/endpoints"
	"github.com/hermod/hermod/services/picker/internal/projection"
	"github.com/hermod/hermod/services/picker/internal/schedconfig"
)

// DefaultFallbacks is how many fallback endpoints a Pick returns beyond the
// primary target, when the pool has them.
const DefaultFallbacks = 2

// DecisionSink takes decision events for publishing. Publish must not
// block; it returns false when the event had to be dropped.
type DecisionSink interface {
	Publish(subject, msgID string, msg proto.Message) bool
}

// Options configure a Server.
type Options struct {
	Pool, Replica string
	Endpoints     *endpoints.Set
	Loader        *schedconfig.Loader
	Folder        *projection.Folder
	// Decisions receives every decision event that the caller did not ask
	// to publish itself (PickRequest.caller_publishes_decision); Subject is
	// where they go.
	Decisions DecisionSink
	Subject   string
	// Fallbacks is the number of fallback endpoints beyond the primary
	// target (DefaultFallbacks is the service's default; 0 = none).
	Fallbacks int
	Logger    *slog.Logger
	Metrics   *Metrics
	// Ready, when set, gates Pick: while it returns an error (config not
	// loaded, projections not rebuilt from the streams yet) Pick answers
	// UNAVAILABLE, so that a gateway asks another replica.
	Ready func() error
	// Tracer, when set, makes every scheduling cycle a span (CycleSpan)
	// under the Pick's. Default: OpenTelemetry's tracer when spans are
	// exported (telemetry.Tracing() at New), none otherwise, so that a
	// Pick without tracing costs nothing extra.
	Tracer trace.Tracer
}

// CycleSpan is the name of a scheduling cycle's span; its attributes are
// the pool, model, candidates, and once decided the decision id, the
// primary profile and its chosen endpoint (or the error).
const CycleSpan = "scheduling cycle"

// Attributes of the CycleSpan.
const (
	AttrPool       = attribute.Key("hermod.pool")
	AttrModel      = attribute.Key("hermod.model")
	AttrRequestID  = attribute.Key("hermod.request_id")
	AttrCandidates = attribute.Key("hermod.candidates")
	AttrDecisionID = attribute.Key("hermod.decision_id")
	AttrProfile    = attribute.Key("hermod.profile")
	AttrEndpoint   = attribute.Key("hermod.endpoint")
	AttrPrefill    = attribute.Key("hermod.prefill_endpoint")
)

// tracerName is the instrumentation scope of the picker's own spans.
const tracerName = "github.com/hermod/hermod/services/picker"

// Server implements pickerv1.PickerServiceServer.
type Server struct {
	pickerv1.UnimplementedPickerServiceServer
	o       Options
	log     *slog.Logger
	verbose bool
}

// New returns a Server.
func New(o Options) *Server {
	o.Fallbacks = max(o.Fallbacks, 0)
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Metrics == nil {
		o.Metrics = NewMetrics(nil, o.Pool, nil)
	}
	if o.Tracer == nil && telemetry.Tracing() {
		o.Tracer = otel.Tracer(tracerName)
	}
	return &Server{o: o, log: o.Logger, verbose: o.Logger.Enabled(context.Background(), telemetry.LevelRequest)}
}

// Pick implements pickerv1.PickerServiceServer.
func (s *Server) Pick(ctx context.Context, in *pickerv1.PickRequest) (*pickerv1.PickResponse, error) {
	start := time.Now()
	out, err := s.pick(ctx, in)
	s.o.Metrics.observePick(start, err)
	return out, err
}

func (s *Server) pick(ctx context.Context, in *pickerv1.PickRequest) (*pickerv1.PickResponse, error) {
	begin := time.Now()
	if s.o.Ready != nil {
		if err := s.o.Ready(); err != nil {
			return nil, failure(codes.Unavailable, pickerv1.PickFailure_PICK_FAILURE_NOT_READY, "picker not ready: "+err.Error())
		}
	}
	if in.GetPool() != "" && in.GetPool() != s.o.Pool {
		return nil, status.Errorf(codes.FailedPrecondition, "this picker serves pool %q, not %q", s.o.Pool, in.GetPool())
	}
	req, err := requestOf(in)
	if err != nil {
		return nil, err
	}

	view := s.o.Endpoints.View()
	if req.Model != "" && view.Registered > 0 && !view.Serves(req.Model) {
		return nil, status.Errorf(codes.NotFound, "the model `%s` does not exist", req.Model)
	}
	if req.Model != "" && view.IsAdapter(req.Model) {
		req.Adapter = req.Model
	}
	candidates := filter(view.Candidates, req.Model, in.GetSubset())

	lease := s.o.Loader.Acquire()
	defer lease.Release()
	sched := lease.Scheduler()
	defer func() { sched.Metrics().RequestProcessed(time.Since(begin)) }()
	if !sched.Serves(req.Body.API) {
		return nil, status.Errorf(codes.InvalidArgument, "%s is not served: the pool's config lists requestHandler.parsers and none of them parses it", req.Body.API.Describe())
	}
	var res *scheduling.Result
	if s.o.Tracer != nil {
		res, err = s.tracedSchedule(ctx, sched, req, candidates)
	} else {
		res, err = sched.Schedule(ctx, req, candidates)
	}
	if err != nil {
		return nil, toStatus(err)
	}
	defer res.Release()

	out := &pickerv1.PickResponse{
		DecisionId: decisions.ID(res.DecisionID),
		Headers:    res.Headers,
		Replica:    s.o.Replica,
	}
	if len(res.RemoveHeaders) > 0 {
		out.RemoveHeaders = append([]string(nil), res.RemoveHeaders...)
	}
	var prefill scheduling.Target
	if t, ok := res.Prefill.Target(); ok {
		prefill = t
		out.Prefill = &pickerv1.Target{Name: t.Endpoint.Name, Address: t.HostPort()}
	}
	if res.Encode != nil {
		for _, t := range res.Encode.Targets {
			out.Encode = append(out.Encode, &pickerv1.Target{Name: t.Endpoint.Name, Address: t.HostPort()})
		}
	}
	targets := withFallbacks(res.Primary, s.o.Fallbacks)
	out.Targets = make([]*pickerv1.Target, len(targets))
	for i, t := range targets {
		resp := &scheduling.Response{RequestID: req.ID, DecisionID: res.DecisionID, Target: t, Prefill: prefill}
		if prefill.Endpoint != nil {
			resp.PrefillProfile = res.Prefill.Profile
		}
		sched.ResponseReceived(ctx, req, resp)
		out.Targets[i] = &pickerv1.Target{Name: t.Endpoint.Name, Address: t.HostPort(), ResponseHeaders: resp.Headers}
	}

	s.o.Metrics.observeDecision(res)
	s.o.Folder.Own(res.DecisionID)
	ev := decisions.Event(s.o.Pool, req, res)
	ev.Replica = s.o.Replica
	for _, t := range out.Targets[1:] {
		ev.FallbackEndpoints = append(ev.FallbackEndpoints, t.GetAddress())
	}
	if in.GetCallerPublishesDecision() && ctx.Err() != nil {
		// The caller gave up first (its attempt timed out, or it went
		// away): it gets no answer, so it publishes no decision and sends
		// no completion. Release what the decision took here, so that this
		// replica's projection stays its peers'.
		s.o.Folder.Completion(context.WithoutCancel(ctx), &eventsv1.RequestCompleted{
			DecisionId: ev.GetDecisionId(), RequestId: req.ID, Pool: s.o.Pool, EndpointName: out.Targets[0].GetName(),
			Outcome: eventsv1.CompletionOutcome_COMPLETION_OUTCOME_CANCELED, Time: timestamppb.Now(),
		}, projection.SourceAbandoned)
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	s.hand(ctx, in, out, ev)
	if s.verbose {
		s.log.LogAttrs(ctx, telemetry.LevelRequest, "request scheduled", slog.String("request_id", req.ID),
			slog.String("decision_id", out.GetDecisionId()), slog.String("model", req.Model),
			slog.String("target", out.Targets[0].GetAddress()), slog.Int("fallbacks", len(out.Targets)-1))
	}
	return out, nil
}

// hand gives the decision event to whoever publishes it: the caller when
// it asked to (in the answer, so that the decision is in the stream exactly
// when the caller got it), else this replica's publisher.
func (s *Server) hand(ctx context.Context, in *pickerv1.PickRequest, out *pickerv1.PickResponse, ev *eventsv1.RoutingDecision) {
	if in.GetCallerPublishesDecision() {
		data, err := proto.Marshal(ev)
		if err == nil {
			out.DecisionEvent = data
			return
		}
		s.log.LogAttrs(ctx, slog.LevelError, "decision event does not encode; publishing it here", slog.String("decision_id", ev.GetDecisionId()), slog.Any("error", err))
	}
	if s.o.Decisions != nil && !s.o.Decisions.Publish(s.o.Subject, ev.GetDecisionId(), ev) {
		s.o.Metrics.decisionsDropped.Inc()
	}
}

// requestOf returns the scheduling request of a PickRequest: its body as
// the caller parsed it, or parsed here from the raw body.
func requestOf(in *pickerv1.PickRequest) (*scheduling.Request, error) {
	api, ok := openai.APIOfPick(in.GetApi())
	if !ok {
		return nil, status.Errorf(codes.InvalidArgument, "api: unsupported %s", in.GetApi())
	}
	var body openai.Request
	if p := in.GetRequest(); p != nil {
		body = openai.FromProto(api, p)
	} else {
		if len(in.GetBody()) == 0 {
			return nil, status.Error(codes.InvalidArgument, "body: empty request body")
		}
		var err error
		if body, err = openai.Parse(api, in.GetBody()); err != nil {
			return nil, status.Error(codes.InvalidArgument, err.Error())
		}
	}
	return scheduling.NewRequest(in.GetRequestId(), body, lowerKeys(in.GetHeaders())), nil
}

// tracedSchedule runs the scheduling cycle in a CycleSpan: the plugins'
// own calls (the indexer's Score) are its children.
func (s *Server) tracedSchedule(ctx context.Context, sched *scheduling.Scheduler, req *scheduling.Request, candidates []*scheduling.Endpoint) (*scheduling.Result, error) {
	ctx, span := s.o.Tracer.Start(ctx, CycleSpan, trace.WithAttributes(AttrPool.String(s.o.Pool), AttrModel.String(req.Model),
		AttrRequestID.String(req.ID), AttrCandidates.Int(len(candidates))))
	defer span.End()
	res, err := sched.Schedule(ctx, req, candidates)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(otelcodes.Error, err.Error())
		return nil, err
	}
	span.SetAttributes(AttrDecisionID.String(decisions.ID(res.DecisionID)), AttrProfile.String(res.Primary.Profile))
	if t, ok := res.Primary.Target(); ok {
		span.SetAttributes(AttrEndpoint.String(t.HostPort()))
	}
	if t, ok := res.Prefill.Target(); ok {
		span.SetAttributes(AttrPrefill.String(t.HostPort()))
	}
	return res, nil
}

// ResponseAttributes returns what the config in force reports to the data
// plane about a finished response of usage u (request-attribute-reporter).
func (s *Server) ResponseAttributes(u scheduling.Usage) []scheduling.Attribute {
	lease := s.o.Loader.Acquire()
	defer lease.Release()
	return lease.Scheduler().ResponseAttributes(u)
}

// Complete implements pickerv1.PickerServiceServer.
func (s *Server) Complete(ctx context.Context, in *pickerv1.CompleteRequest) (*pickerv1.CompleteResponse, error) {
	c := in.GetCompletion()
	if c == nil {
		return nil, status.Error(codes.InvalidArgument, "completion: required")
	}
	if _, err := decisions.ParseID(c.GetDecisionId()); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "completion.decision_id: %v", err)
	}
	s.o.Folder.Completion(ctx, c, projection.SourceRPC)
	return &pickerv1.CompleteResponse{}, nil
}

// FoldCompletion folds a completion from the stream.
func (s *Server) FoldCompletion(ctx context.Context, c *eventsv1.RequestCompleted) {
	s.o.Folder.Completion(ctx, c, projection.SourceStream)
}

// withFallbacks returns the primary profile's targets (the picker's choices)
// followed by its other endpoints by descending total score, up to
// 1+fallbacks in all.
func withFallbacks(pr *scheduling.ProfileResult, fallbacks int) []scheduling.Target {
	want := 1 + fallbacks
	out := make([]scheduling.Target, 0, want)
	out = append(out, pr.Targets[:min(len(pr.Targets), want)]...)
	for len(out) < want {
		best := -1
		for i, e := range pr.Endpoints {
			if chosen(out, e) {
				continue
			}
			if best < 0 || pr.Totals[i] > pr.Totals[best] {
				best = i
			}
		}
		if best < 0 {
			break
		}
		e := pr.Endpoints[best]
		out = append(out, scheduling.Target{Endpoint: e, Port: e.Port})
	}
	return out
}

func chosen(ts []scheduling.Target, e *scheduling.Endpoint) bool {
	for _, t := range ts {
		if t.Endpoint == e {
			return true
		}
	}
	return false
}

// filter returns the candidates that serve model (all when model is empty)
// and are in the subset hint (all when it is empty). It returns cands
// itself when nothing is filtered out.
func filter(cands []*scheduling.Endpoint, model string, subset []string) []*scheduling.Endpoint {
	keep := func(e *scheduling.Endpoint) bool {
		if model != "" && !e.Serves(model) {
			return false
		}
		if len(subset) == 0 {
			return true
		}
		hp := e.HostPort()
		for _, s := range subset {
			if s == hp {
				return true
			}
		}
		return false
	}
	for i, e := range cands {
		if keep(e) {
			continue
		}
		out := append(make([]*scheduling.Endpoint, 0, len(cands)), cands[:i]...)
		for _, e := range cands[i+1:] {
			if keep(e) {
				out = append(out, e)
			}
		}
		return out
	}
	return cands
}

// lowerKeys returns headers with lower-case names (h itself when they are).
func lowerKeys(h map[string]string) map[string]string {
	for k := range h {
		if strings.ToLower(k) != k {
			out := make(map[string]string, len(h))
			for k, v := range h {
				out[strings.ToLower(k)] = v
			}
			return out
		}
	}
	return h
}

// toStatus maps scheduling errors onto gRPC codes (and so onto the HTTP
// statuses the gateway answers).
func toStatus(err error) error {
	var se *scheduling.Error
	if !errors.As(err, &se) {
		return status.Error(codes.Internal, err.Error())
	}
	switch se.Kind {
	case scheduling.KindNoCandidates:
		return failure(codes.Unavailable, pickerv1.PickFailure_PICK_FAILURE_NO_READY_ENDPOINTS, err.Error())
	case scheduling.KindShed:
		return failure(codes.ResourceExhausted, pickerv1.PickFailure_PICK_FAILURE_SHED, err.Error())
	case scheduling.KindNoMatch:
		return failure(codes.Unavailable, pickerv1.PickFailure_PICK_FAILURE_NO_MATCH, err.Error())
	case scheduling.KindBadRequest:
		return status.Error(codes.InvalidArgument, err.Error())
	}
	return status.Error(codes.Internal, err.Error())
}

// ErrorDomain is the domain of the google.rpc.ErrorInfo of Pick failures.
const ErrorDomain = "hermod.picker"

// failure is a Pick error whose ErrorInfo says why (see PickFailure): a
// client tries another replica only when this one is not ready.
func failure(code codes.Code, why pickerv1.PickFailure, msg string) error {
	st := status.New(code, msg)
	if d, err := st.WithDetails(&errdetails.ErrorInfo{Reason: why.String(), Domain: ErrorDomain}); err == nil {
		st = d
	}
	return st.Err()
}
