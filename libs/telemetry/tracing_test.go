package telemetry

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
)

func TestServiceResourceNamesTheService(t *testing.T) {
	res := serviceResource("hermod-picker")
	v, ok := res.Set().Value(semconv.ServiceNameKey)
	if !ok || v.AsString() != "hermod-picker" {
		t.Errorf("service.name = %q (%v), want hermod-picker; resource %v", v.AsString(), ok, res)
	}
	if _, ok := res.Set().Value(semconv.TelemetrySDKNameKey); !ok {
		t.Errorf("the SDK's default attributes are lost: %v", res)
	}
}

func TestSetupTracingWithoutEndpointOnlyPropagates(t *testing.T) {
	shutdown, err := SetupTracing(context.Background(), "hermod-test", "")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = shutdown(context.Background()) }()
	if Tracing() {
		t.Error("tracing on without an endpoint")
	}
	carrier := propagation.MapCarrier{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
	ctx := otel.GetTextMapPropagator().Extract(context.Background(), carrier)
	out := propagation.MapCarrier{}
	otel.GetTextMapPropagator().Inject(ctx, out)
	if out["traceparent"] != carrier["traceparent"] {
		t.Errorf("traceparent not propagated: %v", out)
	}
}
