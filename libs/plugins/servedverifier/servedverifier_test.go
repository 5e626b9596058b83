package servedverifier

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/libs/scheduling/schedulingtest"
)

// The header tells the client which endpoint the data plane says served,
// or which part of the metadata is missing; the check is counted by
// result, and a served endpoint the picker did not choose is a warning.
func TestVerifyServed(t *testing.T) {
	chosen := []string{"10.0.0.1:8000", "10.0.0.2:8000"}
	for _, tc := range []struct {
		name     string
		metadata map[string]any
		header   string
		result   string
		warns    bool
	}{
		{"the primary served", map[string]any{Namespace: map[string]any{ServedKey: "10.0.0.1:8000"}}, "10.0.0.1:8000", ResultChosen, false},
		{"a fallback served", map[string]any{Namespace: map[string]any{ServedKey: "10.0.0.2:8000", "x-gateway-destination-endpoint": "10.0.0.1:8000,10.0.0.2:8000"}}, "10.0.0.2:8000", ResultChosen, false},
		{"another endpoint served", map[string]any{Namespace: map[string]any{ServedKey: "10.0.0.7:8000"}}, "10.0.0.7:8000", ResultOther, true},
		{"no metadata", nil, FailNoNamespace, ResultNoNamespace, false},
		{"other namespaces only", map[string]any{"envoy.lb.subset_hint": map[string]any{ServedKey: "10.0.0.1:8000"}}, FailNoNamespace, ResultNoNamespace, false},
		{"the namespace is not a struct", map[string]any{Namespace: "10.0.0.1:8000"}, FailNoNamespace, ResultNoNamespace, false},
		{"no served key", map[string]any{Namespace: map[string]any{"other": "x"}}, FailNoServed, ResultNoServed, false},
		{"served is not a string", map[string]any{Namespace: map[string]any{ServedKey: 42.0}}, FailNoServed, ResultNoServed, false},
		{"served is empty", map[string]any{Namespace: map[string]any{ServedKey: ""}}, "", ResultNoServed, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			h := schedulingtest.NewHandle()
			h.Log = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
			v := schedulingtest.New[*Verifier](t, h, Type, "", "")
			resp := &scheduling.ServedResponse{RequestID: "req-1", Chosen: chosen, Metadata: tc.metadata}
			v.VerifyServed(context.Background(), resp)
			if got, ok := resp.Headers[ResultHeader]; !ok || got != tc.header || len(resp.Headers) != 1 {
				t.Errorf("headers %v, want %s: %q", resp.Headers, ResultHeader, tc.header)
			}
			if got := testutil.ToFloat64(v.checks.WithLabelValues(tc.result)); got != 1 {
				t.Errorf("%s checks %v, want 1", tc.result, got)
			}
			if warned := strings.Contains(logs.String(), "did not choose"); warned != tc.warns {
				t.Errorf("warning %v, want %v: %s", warned, tc.warns, logs.String())
			} else if warned && (!strings.Contains(logs.String(), "request_id=req-1") || !strings.Contains(logs.String(), "served=10.0.0.7:8000")) {
				t.Errorf("warning without the request and endpoint: %s", logs.String())
			}
		})
	}
}

// It takes no parameters and warns that clients learn the serving
// endpoint's address.
func TestNew(t *testing.T) {
	h := schedulingtest.NewHandle()
	v := schedulingtest.New[*Verifier](t, h, Type, "", "{}")
	if len(h.Warnings) != 1 || !strings.Contains(h.Warnings[0], "conformance tests") {
		t.Errorf("warnings %v", h.Warnings)
	}
	if got := scheduling.ExtensionPoints(v); len(got) != 1 || got[0] != "ServedVerifier" {
		t.Errorf("extension points %v", got)
	}
	h = schedulingtest.NewHandle()
	schedulingtest.New[*Verifier](t, h, Type, "", `{"header": "x"}`)
	if !strings.Contains(strings.Join(h.Warnings, "\n"), "parameters.header: unknown parameter") {
		t.Errorf("warnings %v", h.Warnings)
	}
}
