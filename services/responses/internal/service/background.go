package service

import (
	"context"
	"maps"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	responsesv1 "github.com/hermod/hermod/libs/api/hermod/responses/v1"
	"github.com/hermod/hermod/services/responses/internal/store"
)

// RunBackground says that this service's runners take background
// responses (wake tells them one was submitted); without it Submit is
// refused.
func (s *Server) RunBackground(wake func()) { s.wake = wake }

// Submit implements ResponsesStoreServer.
func (s *Server) Submit(ctx context.Context, req *responsesv1.SubmitRequest) (*responsesv1.SubmitResponse, error) {
	start := time.Now()
	r := req.GetResponse()
	switch {
	case s.wake == nil:
		return nil, s.observe("Submit", start, "", status.Error(codes.FailedPrecondition,
			"this responses service runs no background responses: start it with --gateway-url"))
	case r == nil:
		return nil, s.observe("Submit", start, "", status.Error(codes.InvalidArgument, "response: required"))
	case len(req.GetRequest()) == 0:
		return nil, s.observe("Submit", start, "", status.Error(codes.InvalidArgument, "request: required"))
	}
	rec := fromProto(r)
	rec.Revision = store.NewRevision()
	if err := s.store.Submit(ctx, rec, &store.Job{Request: req.GetRequest(), Headers: maps.Clone(req.GetHeaders())}); err != nil {
		return nil, s.observe("Submit", start, "", err)
	}
	s.wake()
	j, err := s.store.Job(ctx, r.GetId())
	if err != nil {
		return nil, s.observe("Submit", start, "", err)
	}
	return &responsesv1.SubmitResponse{Job: jobProto(j)}, s.observe("Submit", start, "", nil)
}

// GetBackground implements ResponsesStoreServer.
func (s *Server) GetBackground(ctx context.Context, req *responsesv1.GetBackgroundRequest) (*responsesv1.GetBackgroundResponse, error) {
	start := time.Now()
	if req.GetId() == "" {
		return nil, s.observe("GetBackground", start, "", status.Error(codes.InvalidArgument, "id: required"))
	}
	j, err := s.store.Job(ctx, req.GetId())
	if err != nil {
		return nil, s.observe("GetBackground", start, "", err)
	}
	if t := req.GetRunToken(); t != "" && (j.Status != store.JobInProgress || j.Token != t) {
		return nil, s.observe("GetBackground", start, "", status.Errorf(codes.FailedPrecondition, "no run of %s holds that token", req.GetId()))
	}
	return &responsesv1.GetBackgroundResponse{Job: jobProto(j)}, s.observe("GetBackground", start, "", nil)
}

// Cancel implements ResponsesStoreServer.
func (s *Server) Cancel(ctx context.Context, req *responsesv1.CancelRequest) (*responsesv1.CancelResponse, error) {
	start := time.Now()
	if req.GetId() == "" {
		return nil, s.observe("Cancel", start, "", status.Error(codes.InvalidArgument, "id: required"))
	}
	j, err := s.store.Cancel(ctx, req.GetId())
	if err != nil {
		return nil, s.observe("Cancel", start, "", err)
	}
	return &responsesv1.CancelResponse{Job: jobProto(j)}, s.observe("Cancel", start, "", nil)
}

func jobProto(j *store.Job) *responsesv1.BackgroundJob {
	return &responsesv1.BackgroundJob{Id: j.ID, Status: string(j.Status), Error: j.Error,
		Attempts: int32(j.Attempts), UpdatedAtUnixMs: j.UpdatedAt.UnixMilli()}
}
