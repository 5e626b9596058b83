// Package service serves a store over gRPC as hermod.responses.v1.ResponsesStore.
package service

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	responsesv1 "github.com/hermod/hermod/libs/api/hermod/responses/v1"
	"github.com/hermod/hermod/libs/telemetry"
	"github.com/hermod/hermod/services/responses/internal/store"
)

// DefaultChainLimit is GetChain's limit when the request gives none.
const DefaultChainLimit = 100

// Server implements ResponsesStoreServer over a store.
type Server struct {
	responsesv1.UnimplementedResponsesStoreServer
	store      store.Backend
	chainLimit int
	wake       func() // nil: no background runs
	requests   *prometheus.CounterVec
	seconds    *prometheus.HistogramVec
}

// New returns a server over s; chainLimit bounds GetChain (0: the
// default).
func New(s store.Backend, chainLimit int) *Server {
	if chainLimit <= 0 {
		chainLimit = DefaultChainLimit
	}
	return &Server{
		store: s, chainLimit: chainLimit,
		requests: telemetry.NewCounterVec("hermod_responses_requests_total", "ResponsesStore calls by method and gRPC code; Get by the tier that answered (tier=none: not found).", "method", "code", "tier"),
		seconds:  telemetry.NewHistogramVec("hermod_responses_request_seconds", "ResponsesStore call latency.", []float64{0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1}, "method"),
	}
}

// Collectors are the server's metrics.
func (s *Server) Collectors() []prometheus.Collector {
	return []prometheus.Collector{s.requests, s.seconds}
}

func (s *Server) observe(method string, start time.Time, tier store.Tier, err error) error {
	err = grpcError(err)
	t := string(tier)
	if t == "" {
		t = "none"
	}
	s.requests.WithLabelValues(method, status.Code(err).String(), t).Inc()
	s.seconds.WithLabelValues(method).Observe(time.Since(start).Seconds())
	return err
}

// Put implements ResponsesStoreServer.
func (s *Server) Put(ctx context.Context, req *responsesv1.PutRequest) (*responsesv1.PutResponse, error) {
	start := time.Now()
	r := req.GetResponse()
	if r == nil {
		return nil, s.observe("Put", start, "", status.Error(codes.InvalidArgument, "response: required"))
	}
	rec := fromProto(r)
	rec.Revision = store.NewRevision()
	var err error
	if req.GetRunToken() != "" {
		var tail *store.EventTail
		if len(req.GetEvents()) > 0 {
			tail = &store.EventTail{From: int(req.GetEventsFrom()), Events: req.GetEvents()}
		}
		err = s.store.Complete(ctx, rec, req.GetRunToken(), tail)
	} else {
		err = s.store.Put(ctx, rec)
	}
	if err != nil {
		return nil, s.observe("Put", start, "", err)
	}
	return &responsesv1.PutResponse{Revision: rec.Revision}, s.observe("Put", start, "", nil)
}

// Swap implements ResponsesStoreServer.
func (s *Server) Swap(ctx context.Context, req *responsesv1.SwapRequest) (*responsesv1.SwapResponse, error) {
	start := time.Now()
	r := req.GetResponse()
	if r == nil || r.GetId() == "" {
		return nil, s.observe("Swap", start, "", status.Error(codes.InvalidArgument, "response.id: required"))
	}
	rec := fromProto(r)
	rec.Revision = store.NewRevision()
	if err := s.store.Swap(ctx, rec, req.GetRevision()); err != nil {
		return nil, s.observe("Swap", start, "", err)
	}
	return &responsesv1.SwapResponse{Revision: rec.Revision}, s.observe("Swap", start, "", nil)
}

// Get implements ResponsesStoreServer.
func (s *Server) Get(ctx context.Context, req *responsesv1.GetRequest) (*responsesv1.GetResponse, error) {
	start := time.Now()
	if req.GetId() == "" {
		return nil, s.observe("Get", start, "", status.Error(codes.InvalidArgument, "id: required"))
	}
	r, tier, err := s.store.Get(ctx, req.GetId())
	if err != nil {
		return nil, s.observe("Get", start, "", err)
	}
	return &responsesv1.GetResponse{Response: toProto(r), Tier: string(tier)}, s.observe("Get", start, tier, nil)
}

// GetChain implements ResponsesStoreServer.
func (s *Server) GetChain(ctx context.Context, req *responsesv1.GetChainRequest) (*responsesv1.GetChainResponse, error) {
	start := time.Now()
	if req.GetId() == "" {
		return nil, s.observe("GetChain", start, "", status.Error(codes.InvalidArgument, "id: required"))
	}
	limit := s.chainLimit
	if l := int(req.GetLimit()); l > 0 && l < limit {
		limit = l
	}
	chain, err := store.GetChain(ctx, s.store, req.GetId(), limit)
	if err != nil {
		return nil, s.observe("GetChain", start, "", err)
	}
	out := &responsesv1.GetChainResponse{Responses: make([]*responsesv1.StoredResponse, len(chain))}
	for i, r := range chain {
		out.Responses[i] = toProto(r)
	}
	return out, s.observe("GetChain", start, "", nil)
}

// Delete implements ResponsesStoreServer.
func (s *Server) Delete(ctx context.Context, req *responsesv1.DeleteRequest) (*responsesv1.DeleteResponse, error) {
	start := time.Now()
	if req.GetId() == "" {
		return nil, s.observe("Delete", start, "", status.Error(codes.InvalidArgument, "id: required"))
	}
	return &responsesv1.DeleteResponse{}, s.observe("Delete", start, "", s.store.Delete(ctx, req.GetId()))
}

// EventsPage is ReadEvents' page size when the request gives none, and
// the most it returns; EventsPageBytes bounds a page's bytes.
const (
	EventsPage      = 256
	EventsPageBytes = 1 << 20
)

// AppendEvents implements ResponsesStoreServer.
func (s *Server) AppendEvents(ctx context.Context, req *responsesv1.AppendEventsRequest) (*responsesv1.AppendEventsResponse, error) {
	start := time.Now()
	if req.GetId() == "" || req.GetRunToken() == "" {
		return nil, s.observe("AppendEvents", start, "", status.Error(codes.InvalidArgument, "id and run_token: required"))
	}
	n, err := s.store.AppendEvents(ctx, req.GetId(), req.GetRunToken(), int(req.GetFrom()), req.GetEvents())
	if err != nil {
		return nil, s.observe("AppendEvents", start, "", err)
	}
	return &responsesv1.AppendEventsResponse{Length: int64(n)}, s.observe("AppendEvents", start, "", nil)
}

// ReadEvents implements ResponsesStoreServer.
func (s *Server) ReadEvents(ctx context.Context, req *responsesv1.ReadEventsRequest) (*responsesv1.ReadEventsResponse, error) {
	start := time.Now()
	if req.GetId() == "" || req.GetFrom() < 0 {
		return nil, s.observe("ReadEvents", start, "", status.Error(codes.InvalidArgument, "id: required; from: not negative"))
	}
	limit := int(req.GetLimit())
	if limit <= 0 || limit > EventsPage {
		limit = EventsPage
	}
	events, err := s.store.ReadEvents(ctx, req.GetId(), int(req.GetFrom()), limit)
	if err != nil {
		return nil, s.observe("ReadEvents", start, "", err)
	}
	// a page within EventsPageBytes (at least one event), so that it fits
	// a client's default receive size
	size := 0
	for i, e := range events {
		if size += len(e); size > EventsPageBytes && i > 0 {
			events = events[:i]
			break
		}
	}
	return &responsesv1.ReadEventsResponse{Events: events}, s.observe("ReadEvents", start, "", nil)
}

func grpcError(err error) error {
	var tooLong *store.ChainTooLongError
	switch {
	case err == nil:
		return nil
	case status.Code(err) != codes.Unknown:
		return err
	case errors.Is(err, store.ErrNotFound):
		return status.Error(codes.NotFound, err.Error())
	case errors.Is(err, store.ErrConflict):
		return status.Error(codes.Aborted, err.Error())
	case errors.Is(err, store.ErrNotHeld):
		return status.Error(codes.FailedPrecondition, err.Error())
	case errors.Is(err, store.ErrTooLarge), errors.Is(err, store.ErrNoID):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.As(err, &tooLong):
		return status.Error(codes.OutOfRange, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	default:
		return status.Error(codes.Unavailable, err.Error())
	}
}

func fromProto(r *responsesv1.StoredResponse) *store.Record {
	return &store.Record{ID: r.GetId(), PreviousID: r.GetPreviousResponseId(), CreatedAt: time.UnixMilli(r.GetCreatedAtUnixMs()), Data: r.GetData()}
}

func toProto(r *store.Record) *responsesv1.StoredResponse {
	return &responsesv1.StoredResponse{Id: r.ID, PreviousResponseId: r.PreviousID, CreatedAtUnixMs: r.CreatedAt.UnixMilli(), Data: r.Data, Revision: r.Revision}
}
