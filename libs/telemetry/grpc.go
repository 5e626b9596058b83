package telemetry

import (
	"runtime"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
)

// GRPCServerOptions are the options every Hermod gRPC server starts with:
// clients may keep idle connections alive with pings every 10 s, and with
// tracing on (SetupTracing with an endpoint) every call is a span.
func GRPCServerOptions() []grpc.ServerOption {
	opts := []grpc.ServerOption{
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
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
