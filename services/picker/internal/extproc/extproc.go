// Package extproc is the picker's Envoy front door: an ext_proc v3
// ExternalProcessor speaking the GIE endpoint-picker protocol. For each
// inference request (/v1/completions, /v1/chat/completions) it buffers the
// body, picks the endpoints, and answers with the
// x-gateway-destination-endpoint header ("ip:port", primary first, then the
// fallbacks) and the same value in the envoy.lb dynamic metadata; it then
// follows the response (status, time to first byte, usage) and, as the
// request's reporter, delivers its completion exactly once, however it
// ends. Other paths pass through unmodified.
//
// Modes (ProcessingMode.request_body_mode, learnt from the stream's
// protocol_config, else Options.DefaultMode):
//
//   - FULL_DUPLEX_STREAMED (the GIE mode): the headers answer waits for the
//     whole body; it carries the routing header, content-length set to the
//     body's size and clear_route_cache; the body follows in
//     StreamedBodyResponse chunks of at most MaxChunkSize bytes.
//   - BUFFERED: headers are answered at once (a client's routing header
//     removed); the body answer carries the routing header mutation and
//     clear_route_cache, the body unchanged.
//   - STREAMED: as FULL_DUPLEX_STREAMED, but every body chunk is answered
//     with a plain CONTINUE once the headers are; it needs the filter's
//     send_body_without_waiting_for_header_response, since the headers
//     answer waits for the body.
package extproc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	pickerv1 "github.com/hermod/hermod/libs/api/hermod/picker/v1"
	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/libs/telemetry"
)

// Defaults of Options, and the protocol's bound on body chunks.
const (
	DefaultMaxBodyBytes = 16 << 20
	DefaultPickTimeout  = 10 * time.Second
	// MaxChunkSize bounds the body chunks streamed back to the data plane
	// (Envoy recommends at most 64 KiB per message).
	MaxChunkSize = 62000
)

// Picker decides where a request goes (service.Server). Its errors are
// gRPC statuses: Unavailable, ResourceExhausted, NotFound,
// InvalidArgument, ...
type Picker interface {
	Pick(ctx context.Context, in *pickerv1.PickRequest) (*pickerv1.PickResponse, error)
}

// Completer takes the completion of a request routed here: it publishes
// it on the pool's completion stream and folds it into this replica's
// projections at once. It must not block for long.
type Completer interface {
	Complete(ctx context.Context, ev *eventsv1.RequestCompleted)
}

// Options configure a Server.
type Options struct {
	// Pool and Replica name the picker in completion events (the replica
	// is their reporter).
	Pool, Replica string
	Picker        Picker
	Completer     Completer
	// MaxBodyBytes bounds a request body (default DefaultMaxBodyBytes);
	// a larger one is answered 413.
	MaxBodyBytes int64
	// PickTimeout bounds a pick (default DefaultPickTimeout).
	PickTimeout time.Duration
	// DefaultMode is the request and response body mode assumed when the
	// data plane does not say (its protocol_config); default
	// FULL_DUPLEX_STREAMED.
	DefaultMode filterv3.ProcessingMode_BodySendMode
	// Attributes, when set, gives the attributes a finished response
	// reports to the data plane as dynamic metadata (the pool config's
	// request-attribute-reporter), from its usage.
	Attributes func(scheduling.Usage) []scheduling.Attribute
	// Served, when set, runs the pool config's served verifiers
	// (destination-endpoint-served-verifier) on a response whose headers
	// arrived; the headers they set go to the client.
	Served  func(context.Context, *scheduling.ServedResponse)
	Logger  *slog.Logger
	Metrics *Metrics
}

// Server implements extprocv3.ExternalProcessorServer.
type Server struct {
	extprocv3.UnimplementedExternalProcessorServer
	o       Options
	log     *slog.Logger
	m       *Metrics
	verbose bool
}

// New returns a Server.
func New(o Options) (*Server, error) {
	if o.Picker == nil || o.Completer == nil {
		return nil, errors.New("extproc: a Picker and a Completer are required")
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.PickTimeout <= 0 {
		o.PickTimeout = DefaultPickTimeout
	}
	if o.DefaultMode == filterv3.ProcessingMode_NONE {
		o.DefaultMode = filterv3.ProcessingMode_FULL_DUPLEX_STREAMED
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Metrics == nil {
		o.Metrics = NewMetrics(nil)
	}
	return &Server{o: o, log: o.Logger, m: o.Metrics, verbose: o.Logger.Enabled(context.Background(), telemetry.LevelRequest)}, nil
}

// MaxBodyBytes returns the request body bound in force.
func (s *Server) MaxBodyBytes() int64 { return s.o.MaxBodyBytes }

// Process implements extprocv3.ExternalProcessorServer: one stream is one
// HTTP request and its response. It returns when the stream ends; it
// starts no goroutine.
func (s *Server) Process(stream extprocv3.ExternalProcessor_ProcessServer) error {
	s.m.active.Inc()
	defer s.m.active.Dec()
	x := &exchange{s: s, stream: stream, ctx: stream.Context(), reqMode: s.o.DefaultMode, respMode: s.o.DefaultMode}
	err := x.run()
	x.finish(err)
	if errors.Is(err, errAnswered) {
		return nil
	}
	return err
}

// errAnswered ends a stream whose request the picker answered itself.
var errAnswered = errors.New("answered with an immediate response")

// run handles the stream's messages until it ends: nil when the data
// plane closed it.
func (x *exchange) run() error {
	for {
		req, err := x.stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("receive from the data plane: %w", err)
		}
		if err := x.handle(req); err != nil {
			return err
		}
	}
}
