package app

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/hermod/hermod/libs/coord"
)

// With destination-endpoint-served-verifier in the pool's config, the
// picker's ext_proc server tells the client which endpoint Envoy says
// served (the envoy.lb metadata sent with the response headers), or that
// Envoy did not say.
func TestExtProcServedVerifier(t *testing.T) {
	e := newEnv(t)
	for i := range 2 {
		e.register(fmt.Sprintf("pod-%d", i), int32(8000+i))
	}
	if _, err := coord.PutConfig(context.Background(), e.etcd, e.pool, []byte("plugins: [{type: queue-scorer}, {type: destination-endpoint-served-verifier}]")); err != nil {
		t.Fatal(err)
	}
	p := e.start("served-1")
	client := extprocv3.NewExternalProcessorClient(p.conn)

	// exchange routes one request and answers its response headers, sent
	// with the served endpoint of the routing header's position (-1: no
	// metadata); it returns the response headers set.
	exchange := func(served int) map[string]string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		st, err := client.Process(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Send(extprocHeaders(":method", "POST", ":path", "/v1/completions")); err != nil {
			t.Fatal(err)
		}
		if err := st.Send(extprocBody(false, `{"model":"llama","prompt":"which pod?"}`)); err != nil {
			t.Fatal(err)
		}
		hr, err := st.Recv()
		if err != nil {
			t.Fatal(err)
		}
		var dest []string
		for _, h := range hr.GetRequestHeaders().GetResponse().GetHeaderMutation().GetSetHeaders() {
			if h.GetHeader().GetKey() == "x-gateway-destination-endpoint" {
				dest = strings.Split(string(h.GetHeader().GetRawValue()), ",")
			}
		}
		if len(dest) != 2 {
			t.Fatalf("destination %v", dest)
		}
		if _, err := st.Recv(); err != nil { // the body back
			t.Fatal(err)
		}
		rh := &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseHeaders{ResponseHeaders: &extprocv3.HttpHeaders{
			Headers: &corev3.HeaderMap{Headers: []*corev3.HeaderValue{{Key: ":status", RawValue: []byte("200")}}}, EndOfStream: true}}}
		if served >= 0 {
			rh.MetadataContext = &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{
				"envoy.lb": {Fields: map[string]*structpb.Value{"x-gateway-destination-endpoint-served": structpb.NewStringValue(dest[served])}}}}
		}
		if err := st.Send(rh); err != nil {
			t.Fatal(err)
		}
		r, err := st.Recv()
		if err != nil {
			t.Fatal(err)
		}
		_ = st.CloseSend()
		set := map[string]string{}
		for _, h := range r.GetResponseHeaders().GetResponse().GetHeaderMutation().GetSetHeaders() {
			set[h.GetHeader().GetKey()] = string(h.GetHeader().GetRawValue())
		}
		set["(fallback)"] = dest[1]
		return set
	}
	got := exchange(1)
	if got["x-conformance-test-served-endpoint"] != got["(fallback)"] {
		t.Errorf("served by the fallback: response headers %v", got)
	}
	if got := exchange(-1); got["x-conformance-test-served-endpoint"] != "fail: missing envoy lb metadata" {
		t.Errorf("no metadata: response headers %v", got)
	}
}
