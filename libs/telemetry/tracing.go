package telemetry

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
)

// tracing says whether SetupTracing installed an exporter.
var tracing atomic.Bool

// Tracing reports whether spans are exported (SetupTracing was given an
// endpoint). Services instrument their servers and clients only then: the
// instrumentation costs time on every request, and without an exporter the
// client's own trace headers are forwarded as they are anyway.
func Tracing() bool { return tracing.Load() }

// SetupTracing installs the W3C trace-context propagator, so trace context
// flows gateway -> picker -> indexer whatever else is configured, and, when
// endpoint (host:port of an OTLP/gRPC collector) is set, a tracer provider
// that batches every span to it, tagged with the service name. The
// returned shutdown flushes and stops the exporter; it is a no-op without
// an endpoint.
func SetupTracing(ctx context.Context, service, endpoint string) (shutdown func(context.Context) error, err error) {
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	if endpoint == "" {
		return func(context.Context) error { return nil }, nil
	}
	exp, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(endpoint), otlptracegrpc.WithInsecure(),
		otlptracegrpc.WithTimeout(5*time.Second))
	if err != nil {
		return nil, fmt.Errorf("otlp trace exporter for %s: %w", endpoint, err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(serviceResource(service)))
	otel.SetTracerProvider(tp)
	tracing.Store(true)
	return func(ctx context.Context) error {
		tracing.Store(false)
		return tp.Shutdown(ctx)
	}, nil
}

// serviceResource is the SDK's default resource (telemetry.sdk.*, and
// OTEL_RESOURCE_ATTRIBUTES) with service.name set to service. The name is
// added schemaless: the default resource's schema URL is the SDK's
// semconv version, and merging attributes with another schema URL fails
// (and would leave service.name at "unknown_service:<binary>").
func serviceResource(service string) *resource.Resource {
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(semconv.ServiceName(service)))
	if err != nil { // only on conflicting schema URLs, which a schemaless resource never has
		return resource.NewSchemaless(semconv.ServiceName(service))
	}
	return res
}
