package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	"github.com/hermod/hermod/libs/bus"
	"github.com/hermod/hermod/libs/coord"
)

func extprocHeaders(kv ...string) *extprocv3.ProcessingRequest {
	hm := &corev3.HeaderMap{}
	for i := 0; i+1 < len(kv); i += 2 {
		hm.Headers = append(hm.Headers, &corev3.HeaderValue{Key: kv[i], RawValue: []byte(kv[i+1])})
	}
	full := filterv3.ProcessingMode_FULL_DUPLEX_STREAMED
	return &extprocv3.ProcessingRequest{
		ProtocolConfig: &extprocv3.ProtocolConfiguration{RequestBodyMode: full, ResponseBodyMode: full},
		Request:        &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: &extprocv3.HttpHeaders{Headers: hm}},
	}
}

func extprocBody(response bool, b string) *extprocv3.ProcessingRequest {
	body := &extprocv3.HttpBody{Body: []byte(b), EndOfStream: true}
	if response {
		return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{ResponseBody: body}}
	}
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{RequestBody: body}}
}

// Envoy's ext_proc against a running picker, on its gRPC port: the
// request is routed by the pool's config, counts in flight until its
// response ends, and its completion, reported by the picker itself, is on
// the completion stream and folded at once.
func TestExtProcRoutesAndReportsCompletions(t *testing.T) {
	e := newEnv(t)
	for i := range 3 {
		e.register(fmt.Sprintf("pod-%d", i), int32(8000+i))
	}
	if _, err := coord.PutConfig(context.Background(), e.etcd, e.pool, []byte(loadAware)); err != nil {
		t.Fatal(err)
	}
	p := e.start("ext-1")
	found := make(chan *eventsv1.RequestCompleted, 16)
	csubj, _ := bus.CompletionsSubject(e.pool)
	js, _ := jetstreamOf(e.nc)
	c, err := bus.Consume(context.Background(), js, bus.ConsumeOptions{Stream: bus.CompletionsStream, FilterSubject: csubj},
		func(c *eventsv1.RequestCompleted, _ bus.Meta) { found <- c })
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	hc := healthpb.NewHealthClient(p.conn)
	if r, err := hc.Check(context.Background(), &healthpb.HealthCheckRequest{Service: extprocv3.ExternalProcessor_ServiceDesc.ServiceName}); err != nil || r.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("ext_proc health: %v %v", r, err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client := extprocv3.NewExternalProcessorClient(p.conn)
	st, err := client.Process(ctx)
	if err != nil {
		t.Fatal(err)
	}
	send := func(r *extprocv3.ProcessingRequest) {
		t.Helper()
		if err := st.Send(r); err != nil {
			t.Fatal(err)
		}
	}
	recv := func() *extprocv3.ProcessingResponse {
		t.Helper()
		r, err := st.Recv()
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	body := `{"model":"llama","prompt":"routed by envoy"}`
	send(extprocHeaders(":method", "POST", ":path", "/v1/completions", "x-request-id", "envoy-1"))
	send(extprocBody(false, body))
	hr := recv()
	var dest string
	for _, h := range hr.GetRequestHeaders().GetResponse().GetHeaderMutation().GetSetHeaders() {
		if h.GetHeader().GetKey() == "x-gateway-destination-endpoint" {
			dest = string(h.GetHeader().GetRawValue())
		}
	}
	md := hr.GetDynamicMetadata().GetFields()["envoy.lb"].GetStructValue().GetFields()["x-gateway-destination-endpoint"].GetStringValue()
	if addrs := strings.Split(dest, ","); len(addrs) != 3 || !strings.HasPrefix(addrs[0], "127.0.0.1:800") || md != dest {
		t.Fatalf("destination header %q, metadata %q", dest, md)
	}
	if sr := recv().GetRequestBody().GetResponse().GetBodyMutation().GetStreamedResponse(); string(sr.GetBody()) != body || !sr.GetEndOfStream() {
		t.Fatalf("body back %v", sr)
	}
	eventually(t, "the request in flight", func() bool { return p.state(t).InFlight == 1 })

	send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseHeaders{ResponseHeaders: &extprocv3.HttpHeaders{
		Headers: &corev3.HeaderMap{Headers: []*corev3.HeaderValue{{Key: ":status", RawValue: []byte("200")}, {Key: "content-type", RawValue: []byte("application/json")}}}}}})
	recv()
	send(extprocBody(true, `{"choices":[{"text":"ok"}],"usage":{"prompt_tokens":4,"completion_tokens":1}}`))
	recv()
	if err := st.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("stream end: %v", err)
	}
	eventually(t, "the completion folded", func() bool { return p.state(t).InFlight == 0 })
	select {
	case ev := <-found:
		if ev.GetRequestId() != "envoy-1" || ev.GetReporter() != "ext-1" || ev.GetOutcome() != eventsv1.CompletionOutcome_COMPLETION_OUTCOME_SUCCESS ||
			ev.GetEndpoint() != strings.Split(dest, ",")[0] || ev.GetStatusCode() != 200 || ev.GetPromptTokens() != 4 || ev.GetModel() != "llama" {
			t.Errorf("completion on the stream %v", ev)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no completion on the stream")
	}

	// The picker's own answers, through the real scheduler.
	for _, tc := range []struct {
		name   string
		req    *extprocv3.ProcessingRequest
		body   string
		status int
	}{
		{"a model nobody serves", extprocHeaders(":method", "POST", ":path", "/v1/completions"), `{"model":"nope","prompt":"x"}`, 404},
		{"a subset hint of no endpoint of the pool", extprocHeaders(":method", "POST", ":path", "/v1/completions", "x-gateway-destination-endpoint-subset", "10.9.9.9:1"), body, 503},
	} {
		st, err := client.Process(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Send(tc.req); err != nil {
			t.Fatal(err)
		}
		if err := st.Send(extprocBody(false, tc.body)); err != nil {
			t.Fatal(err)
		}
		r, err := st.Recv()
		if err != nil || int(r.GetImmediateResponse().GetStatus().GetCode()) != tc.status {
			t.Errorf("%s: %v %v, want an immediate %d", tc.name, r, err, tc.status)
		}
	}
}
