package telemetry

import (
	"runtime"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
)

// MaxStreamsPerConnection bounds the calls one client connection has
// open at once (an Envoy in front of the picker has one per request in
// flight; past the bound it opens another connection, as HTTP/2 clients
// do when a server's SETTINGS_MAX_CONCURRENT_STREAMS is reached).
const MaxStreamsPerConnection = 1024

// GRPCServerOptions are the options every Hermod gRPC server starts with:
// clients may keep idle connections alive with pings every 10 s; a
// connection carries at most MaxStreamsPerConnection calls at once; one
// without a call for 10 minutes is closed (its client reconnects when it
// has one), and a peer that stops answering the server's pings (every 2
// minutes, 20 s to answer) is dropped with its calls; with tracing on
// (SetupTracing with an endpoint) every call is a span.
func GRPCServerOptions() []grpc.ServerOption {
	opts := []grpc.ServerOption{
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: 10 * time.Minute, Time: 2 * time.Minute, Timeout: 20 * time.Second}),
		grpc.MaxConcurrentStreams(MaxStreamsPerConnection),
		// Calls run on a pool of goroutines whose stacks have grown to
		// what a handler needs, not on a fresh goroutine per call whose
		// stack grows (and is copied) on every call.
		grpc.NumStreamWorkers(uint32(runtime.GOMAXPROCS(0))),
	}
	if Tracing() {
		opts = append(opts, grpc.StatsHandler(otelgrpc.NewServerHandler()))
	}
	return opts
}

// GRPCClientOptions are the dial options every Hermod gRPC client adds to
// its own (credentials, keepalive): with tracing on (SetupTracing with an
// endpoint) every call is a client span whose context the server receives
// in the call's metadata, so the server's span is its child. Without
// tracing it is empty and the calls cost nothing extra. Call it after
// SetupTracing.
func GRPCClientOptions() []grpc.DialOption {
	if !Tracing() {
		return nil
	}
	return []grpc.DialOption{grpc.WithStatsHandler(otelgrpc.NewClientHandler())}
}
