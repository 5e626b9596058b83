package extproc

import (
	"context"
	"slices"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/hermod/hermod/libs/scheduling"
)

// The served verifiers get the response's request id, the chosen
// endpoints and the data plane's metadata as JSON values; the headers
// they set go on the response beside the target's own.
func TestServedVerifiersSeeTheResponseMetadata(t *testing.T) {
	var seen []*scheduling.ServedResponse
	e := newTestEnv(t, func(o *Options) {
		o.Served = func(_ context.Context, r *scheduling.ServedResponse) {
			seen = append(seen, r)
			lb, _ := r.Metadata[DestinationNamespace].(map[string]any)
			if v, ok := lb[ServedKey].(string); ok {
				r.SetHeader("x-served", v)
			}
		}
	})
	for _, withMetadata := range []bool{true, false} {
		s := e.open()
		s.send(post(fullDuplex, "/v1/completions"), requestBody([]byte(`{"model":"llama","prompt":"x"}`), true))
		s.recv()
		s.readBody(true, 0, true)
		rh := responseHeaders(true, ":status", "200")
		if withMetadata {
			rh.MetadataContext = &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{
				DestinationNamespace: {Fields: map[string]*structpb.Value{ServedKey: structpb.NewStringValue("10.0.0.2:8000"), "n": structpb.NewNumberValue(3)}},
			}}
		}
		s.send(rh)
		set, _ := setOf(s.recv().GetResponseHeaders().GetResponse().GetHeaderMutation())
		s.close()
		if withMetadata && (set["x-served"] != "10.0.0.2:8000" || set["x-session-token"] != "tok-b") {
			t.Errorf("with metadata: response headers %v", set)
		}
		if _, ok := set["x-served"]; !withMetadata && ok {
			t.Errorf("without metadata: response headers %v", set)
		}
	}
	if len(seen) != 2 {
		t.Fatalf("verifiers ran %d times", len(seen))
	}
	r := seen[0]
	if r.RequestID != "req-1" || !slices.Equal(r.Chosen, []string{"10.0.0.1:8000", "10.0.0.2:8000"}) {
		t.Errorf("response %+v", r)
	}
	if lb, _ := r.Metadata[DestinationNamespace].(map[string]any); lb["n"] != 3.0 {
		t.Errorf("metadata %v", r.Metadata)
	}
	if seen[1].Metadata != nil {
		t.Errorf("metadata without any sent: %v", seen[1].Metadata)
	}
}
