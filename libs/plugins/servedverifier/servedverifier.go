// Package servedverifier holds destination-endpoint-served-verifier, the
// llm-d router's conformance aid: when a response's headers reach the
// picker's Envoy ext_proc server, it reads which endpoint Envoy says
// served the request (the x-gateway-destination-endpoint-served key of
// the envoy.lb dynamic metadata Envoy forwards with them) and tells the
// client in the x-conformance-test-served-endpoint response header, so
// that a conformance test can check that the data plane honoured the
// picker's choice. Without the metadata the header says which part is
// missing ("fail: missing envoy lb metadata", "fail: missing destination
// endpoint served metadata").
//
// Beyond upstream, it compares the served endpoint with the ones the
// picker chose (the primary and the fallbacks): a response from any other
// endpoint is logged as a warning, and every check is counted by result
// in hermod_picker_served_endpoint_checks_total.
//
// Envoy sends the metadata only when the ext_proc filter forwards the
// namespace (metadata_options.forwarding_namespaces.untyped: [envoy.lb])
// and sends the response headers to the picker. The gateway is its own
// data plane and does not run the verifier: it knows which endpoint it
// sent each request to.
package servedverifier

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/libs/telemetry"
)

// Type is the plugin type.
const Type = "destination-endpoint-served-verifier"

// Names of the GIE endpoint-picker protocol the verifier reads and writes.
const (
	// Namespace and ServedKey name the served endpoint in the dynamic
	// metadata the data plane sends with the response headers.
	Namespace = "envoy.lb"
	ServedKey = "x-gateway-destination-endpoint-served"
	// ResultHeader is the response header the verifier writes.
	ResultHeader = "x-conformance-test-served-endpoint"
)

// The header's value when the metadata does not say which endpoint
// served.
const (
	FailNoNamespace = "fail: missing envoy lb metadata"
	FailNoServed    = "fail: missing destination endpoint served metadata"
)

// Check results, the result label of hermod_picker_served_endpoint_checks_total.
const (
	ResultChosen      = "chosen"       // an endpoint the picker chose served
	ResultOther       = "other"        // an endpoint the picker did not choose served
	ResultNoNamespace = "no_namespace" // no envoy.lb metadata
	ResultNoServed    = "no_served"    // envoy.lb without the served endpoint
)

func init() {
	scheduling.Register(scheduling.Registration{Type: Type, New: New})
}

// Verifier is destination-endpoint-served-verifier.
type Verifier struct {
	scheduling.Named
	log    *slog.Logger
	checks *prometheus.CounterVec
}

// New builds a destination-endpoint-served-verifier; it takes no
// parameters.
func New(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
	if err := scheduling.DecodeParameters(raw, &struct{}{}, h); err != nil {
		return nil, err
	}
	h.Warn(Type + ": every response tells its client the address of the endpoint that served it: for conformance tests and debugging")
	return &Verifier{
		Named: scheduling.Named{Type: Type, Name: name},
		log:   h.Logger(),
		checks: scheduling.Metric(h, telemetry.NewCounterVec("hermod_picker_served_endpoint_checks_total",
			"Responses whose served endpoint destination-endpoint-served-verifier checked, by result: chosen (one the picker chose served), other (another endpoint served), no_namespace (no envoy.lb metadata), no_served (envoy.lb without x-gateway-destination-endpoint-served, or with an empty one).",
			"result")),
	}, nil
}

// VerifyServed implements scheduling.ServedVerifier.
func (v *Verifier) VerifyServed(ctx context.Context, resp *scheduling.ServedResponse) {
	lb, ok := resp.Metadata[Namespace].(map[string]any)
	if !ok {
		v.checks.WithLabelValues(ResultNoNamespace).Inc()
		resp.SetHeader(ResultHeader, FailNoNamespace)
		v.log.LogAttrs(ctx, telemetry.LevelRequest, "the data plane sent no envoy.lb metadata with the response: forward the namespace to the ext_proc filter",
			slog.String("request_id", resp.RequestID), slog.String("plugin", v.Name))
		return
	}
	served, ok := lb[ServedKey].(string)
	if !ok {
		v.checks.WithLabelValues(ResultNoServed).Inc()
		resp.SetHeader(ResultHeader, FailNoServed)
		v.log.LogAttrs(ctx, telemetry.LevelRequest, "the data plane's envoy.lb metadata does not name the endpoint that served",
			slog.String("request_id", resp.RequestID), slog.String("plugin", v.Name))
		return
	}
	resp.SetHeader(ResultHeader, served)
	if strings.TrimSpace(served) == "" {
		v.checks.WithLabelValues(ResultNoServed).Inc()
		return
	}
	if slices.Contains(resp.Chosen, strings.TrimSpace(served)) {
		v.checks.WithLabelValues(ResultChosen).Inc()
		return
	}
	v.checks.WithLabelValues(ResultOther).Inc()
	v.log.LogAttrs(ctx, slog.LevelWarn, "an endpoint the picker did not choose served the request",
		slog.String("request_id", resp.RequestID), slog.String("served", served),
		slog.String("chosen", strings.Join(resp.Chosen, ",")), slog.String("plugin", v.Name))
}

var _ scheduling.ServedVerifier = (*Verifier)(nil)
