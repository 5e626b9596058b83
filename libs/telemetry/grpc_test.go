package telemetry

import (
	"context"
	"net"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// With tracing on, a call from a client built with GRPCClientOptions to a
// server built with GRPCServerOptions is a client span under the caller's
// span and a server span under the client span, in one trace; with
// tracing off neither side adds anything.
func TestGRPCOptionsLinkSpans(t *testing.T) {
	if Tracing() {
		t.Fatal("tracing on before SetupTracing")
	}
	if n := len(GRPCClientOptions()); n != 0 {
		t.Fatalf("GRPCClientOptions without tracing: %d options", n)
	}
	if n := len(GRPCServerOptions()); n != 4 { // keepalive policy and parameters, stream bound, stream workers
		t.Fatalf("GRPCServerOptions without tracing: %d options", n)
	}

	ctx := context.Background()
	// an exporter that never connects: nothing is exported before the
	// recorder below replaces its provider
	shutdown, err := SetupTracing(ctx, "hermod-test", "127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	prev := otel.GetTracerProvider()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	otel.SetTracerProvider(tp)
	defer func() {
		otel.SetTracerProvider(prev)
		_ = tp.Shutdown(ctx)
		_ = shutdown(ctx)
		if Tracing() {
			t.Error("tracing still on after shutdown")
		}
	}()
	if !Tracing() || len(GRPCClientOptions()) != 1 {
		t.Fatalf("tracing %v, client options %d", Tracing(), len(GRPCClientOptions()))
	}

	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// Stop waits for the handlers, and so for the server span they end,
	// only with WaitForHandlers
	gs := grpc.NewServer(append(GRPCServerOptions(), grpc.WaitForHandlers(true))...)
	healthpb.RegisterHealthServer(gs, health.NewServer())
	go func() { _ = gs.Serve(lis) }()
	defer gs.Stop()
	conn, err := grpc.NewClient(lis.Addr().String(), append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, GRPCClientOptions()...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()

	cctx, root := tp.Tracer("test").Start(ctx, "caller")
	if _, err := healthpb.NewHealthClient(conn).Check(cctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	root.End()
	gs.Stop() // the server span may end after the client has its answer: wait for it

	var client, server sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		switch s.SpanKind() {
		case trace.SpanKindClient:
			client = s
		case trace.SpanKindServer:
			server = s
		}
	}
	if client == nil || server == nil {
		t.Fatalf("spans: %v", names(rec.Ended()))
	}
	const method = "grpc.health.v1.Health/Check"
	if client.Name() != method || server.Name() != method {
		t.Errorf("span names %q %q, want %q", client.Name(), server.Name(), method)
	}
	if client.Parent().SpanID() != root.SpanContext().SpanID() {
		t.Errorf("client span's parent %s, want the caller's span %s", client.Parent().SpanID(), root.SpanContext().SpanID())
	}
	if server.Parent().SpanID() != client.SpanContext().SpanID() || !server.Parent().IsRemote() {
		t.Errorf("server span's parent %s (remote %v), want the client span %s", server.Parent().SpanID(), server.Parent().IsRemote(), client.SpanContext().SpanID())
	}
	if tid := root.SpanContext().TraceID(); client.SpanContext().TraceID() != tid || server.SpanContext().TraceID() != tid {
		t.Errorf("trace ids: caller %s client %s server %s", tid, client.SpanContext().TraceID(), server.SpanContext().TraceID())
	}
}

func names(spans []sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.SpanKind().String()+" "+s.Name())
	}
	return out
}

// A client connection carries at most MaxStreamsPerConnection calls at
// once: the next waits until one ends.
func TestGRPCServerBoundsStreamsPerConnection(t *testing.T) {
	srv := grpc.NewServer(GRPCServerOptions()...)
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(l) }()
	defer srv.Stop()
	conn, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	client := healthpb.NewHealthClient(conn)
	watch := func(ctx context.Context) error {
		w, err := client.Watch(ctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			return err
		}
		_, err = w.Recv() // the first status: the stream is open on the server
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first, cancelFirst := context.WithCancel(ctx)
	if err := watch(first); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < MaxStreamsPerConnection; i++ {
		if err := watch(ctx); err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
	}
	over, cancelOver := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancelOver()
	if err := watch(over); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("stream %d of one connection: %v, want it held until its deadline", MaxStreamsPerConnection+1, err)
	}
	cancelFirst()
	next, cancelNext := context.WithTimeout(ctx, 5*time.Second)
	defer cancelNext()
	if err := watch(next); err != nil {
		t.Fatalf("a stream once another ended: %v", err)
	}
}
