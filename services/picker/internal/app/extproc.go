package app

import (
	"context"
	"fmt"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	"github.com/hermod/hermod/libs/bus"
	"github.com/hermod/hermod/services/picker/internal/extproc"
)

// sourceExtProc labels the completions of requests routed through ext_proc
// in the projection metrics.
const sourceExtProc = "extproc"

// extprocCompletions delivers the completions of requests routed through
// Envoy's ext_proc, which this replica reports itself (there is no gateway
// in front): each is published on the pool's completion stream, where the
// other replicas and the autoscaler read it, and folded here at once, as a
// Complete call would be. The publisher never blocks (it counts what it
// drops); the fold bounds its own I/O.
type extprocCompletions struct {
	a       *app
	subject string
}

// Complete implements extproc.Completer.
func (c extprocCompletions) Complete(ctx context.Context, ev *eventsv1.RequestCompleted) {
	c.a.publisher.Publish(c.subject, ev.GetDecisionId(), ev)
	c.a.folder.Completion(ctx, ev, sourceExtProc)
}

// newExtProc builds the Envoy ext_proc server on the picker service.
func (a *app) newExtProc() (*extproc.Server, error) {
	subject, err := bus.CompletionsSubject(a.cfg.Pool)
	if err != nil {
		return nil, err
	}
	s, err := extproc.New(extproc.Options{
		Pool: a.cfg.Pool, Replica: a.cfg.Replica, Picker: a.svc, Completer: extprocCompletions{a: a, subject: subject},
		MaxBodyBytes: a.cfg.ExtProcMaxBodyBytes, Logger: a.log, Metrics: extproc.NewMetrics(a.reg), Attributes: a.svc.ResponseAttributes,
		Served: a.svc.VerifyServed,
	})
	if err != nil {
		return nil, fmt.Errorf("ext_proc server: %w", err)
	}
	return s, nil
}

// grpcMaxRecv is the gRPC server's message bound: ext_proc's BUFFERED mode
// sends a whole request body in one message, so it is the body bound and
// room for the headers (never below gRPC's default 4 MiB).
func grpcMaxRecv(maxBody int64) int {
	return int(max(maxBody+1<<20, 4<<20))
}
