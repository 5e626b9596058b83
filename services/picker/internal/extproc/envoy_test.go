package extproc

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	pickerv1 "github.com/hermod/hermod/libs/api/hermod/picker/v1"
)

// fakePicker answers every Pick with its decision (or its error) and
// keeps the requests.
type fakePicker struct {
	mu   sync.Mutex
	reqs []*pickerv1.PickRequest
	out  *pickerv1.PickResponse
	err  error
}

func (p *fakePicker) Pick(_ context.Context, in *pickerv1.PickRequest) (*pickerv1.PickResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reqs = append(p.reqs, proto.Clone(in).(*pickerv1.PickRequest))
	if p.err != nil {
		return nil, p.err
	}
	return proto.Clone(p.out).(*pickerv1.PickResponse), nil
}

func (p *fakePicker) requests() []*pickerv1.PickRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*pickerv1.PickRequest(nil), p.reqs...)
}

// fakeCompleter keeps the completions.
type fakeCompleter struct {
	mu  sync.Mutex
	evs []*eventsv1.RequestCompleted
}

func (c *fakeCompleter) Complete(_ context.Context, ev *eventsv1.RequestCompleted) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.evs = append(c.evs, ev)
}

func (c *fakeCompleter) all() []*eventsv1.RequestCompleted {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*eventsv1.RequestCompleted(nil), c.evs...)
}

// decision is the fake picker's default answer: a primary target and a
// fallback, headers to set and remove, per-target response headers.
func decision() *pickerv1.PickResponse {
	return &pickerv1.PickResponse{
		DecisionId: "00000000000000000000000000000042",
		Targets: []*pickerv1.Target{
			{Name: "pod-a", Address: "10.0.0.1:8000", ResponseHeaders: map[string]string{"x-decoder-host-port": "10.0.0.1:8000", "x-session-token": "tok-a"}},
			{Name: "pod-b", Address: "10.0.0.2:8000", ResponseHeaders: map[string]string{"x-decoder-host-port": "10.0.0.2:8000", "x-session-token": "tok-b"}},
		},
		Headers:       map[string]string{"x-prefiller-host-port": "10.0.0.9:8000"},
		RemoveHeaders: []string{"X-Drop-Me"},
		Replica:       "picker-1",
	}
}

// testEnv runs a Server on a loopback gRPC server.
type testEnv struct {
	t      testing.TB
	srv    *Server
	picker *fakePicker
	done   *fakeCompleter
	m      *Metrics
	client extprocv3.ExternalProcessorClient
}

func newTestEnv(t testing.TB, tune func(*Options)) *testEnv {
	t.Helper()
	e := &testEnv{t: t, picker: &fakePicker{out: decision()}, done: &fakeCompleter{}, m: NewMetrics(prometheus.NewRegistry())}
	o := Options{Pool: "pool-a", Replica: "picker-1", Picker: e.picker, Completer: e.done, Metrics: e.m,
		Logger: slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelDebug - 4}))}
	if tune != nil {
		tune(&o)
	}
	srv, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	e.srv = srv
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(grpc.MaxRecvMsgSize(64 << 20))
	extprocv3.RegisterExternalProcessorServer(gs, srv)
	served := make(chan error, 1)
	go func() { served <- gs.Serve(lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20), grpc.MaxCallSendMsgSize(64<<20)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = conn.Close()
		gs.Stop()
		if err := <-served; err != nil && !errors.Is(err, grpc.ErrServerStopped) && !errors.Is(err, fs.ErrClosed) {
			t.Errorf("serve: %v", err)
		}
	})
	e.client = extprocv3.NewExternalProcessorClient(conn)
	return e
}

// stream is the data plane's side of one ext_proc stream.
type stream struct {
	t      testing.TB
	c      extprocv3.ExternalProcessor_ProcessClient
	cancel context.CancelFunc
}

func (e *testEnv) open() *stream {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	c, err := e.client.Process(ctx)
	if err != nil {
		cancel()
		e.t.Fatal(err)
	}
	e.t.Cleanup(cancel)
	return &stream{t: e.t, c: c, cancel: cancel}
}

func (s *stream) send(reqs ...*extprocv3.ProcessingRequest) {
	s.t.Helper()
	for _, r := range reqs {
		if err := s.c.Send(r); err != nil {
			s.t.Fatalf("send %T: %v", r.GetRequest(), err)
		}
	}
}

func (s *stream) recv() *extprocv3.ProcessingResponse {
	s.t.Helper()
	r, err := s.c.Recv()
	if err != nil {
		s.t.Fatalf("recv: %v", err)
	}
	return r
}

// close half-closes the stream, as the data plane does once the response
// is through, and waits for the server to end it.
func (s *stream) close() {
	s.t.Helper()
	if err := s.c.CloseSend(); err != nil {
		s.t.Fatal(err)
	}
	if r, err := s.c.Recv(); !errors.Is(err, io.EOF) {
		s.t.Fatalf("after the half-close: %v, %v (want the end of the stream)", r, err)
	}
}

// ended waits for the server to end the stream (after an immediate
// response).
func (s *stream) ended() {
	s.t.Helper()
	if r, err := s.c.Recv(); !errors.Is(err, io.EOF) {
		s.t.Fatalf("want the end of the stream, got %v, %v", r, err)
	}
}

// readBody reads streamed request (or response) body chunks until one
// has end_of_stream (or want bytes came, when eos is false).
func (s *stream) readBody(request bool, want int, eos bool) (body []byte, chunks []int) {
	s.t.Helper()
	for {
		r := s.recv()
		var br *extprocv3.BodyResponse
		if request {
			br = r.GetRequestBody()
		} else {
			br = r.GetResponseBody()
		}
		sr := br.GetResponse().GetBodyMutation().GetStreamedResponse()
		if sr == nil {
			s.t.Fatalf("want a streamed body chunk, got %v", r)
		}
		body = append(body, sr.GetBody()...)
		chunks = append(chunks, len(sr.GetBody()))
		if sr.GetEndOfStream() {
			if !eos {
				s.t.Fatalf("end_of_stream on a body that ends with trailers")
			}
			return body, chunks
		}
		if !eos && len(body) >= want {
			return body, chunks
		}
	}
}

func protocol(req, resp filterv3.ProcessingMode_BodySendMode) *extprocv3.ProtocolConfiguration {
	return &extprocv3.ProtocolConfiguration{RequestBodyMode: req, ResponseBodyMode: resp}
}

var fullDuplex = protocol(filterv3.ProcessingMode_FULL_DUPLEX_STREAMED, filterv3.ProcessingMode_FULL_DUPLEX_STREAMED)

// headerList builds a HeaderMap from name, value pairs: values in
// raw_value, as Envoy sends them.
func headerList(kv ...string) *corev3.HeaderMap {
	hm := &corev3.HeaderMap{}
	for i := 0; i+1 < len(kv); i += 2 {
		hm.Headers = append(hm.Headers, &corev3.HeaderValue{Key: kv[i], RawValue: []byte(kv[i+1])})
	}
	return hm
}

func requestHeaders(pc *extprocv3.ProtocolConfiguration, eos bool, kv ...string) *extprocv3.ProcessingRequest {
	return &extprocv3.ProcessingRequest{ProtocolConfig: pc, Request: &extprocv3.ProcessingRequest_RequestHeaders{
		RequestHeaders: &extprocv3.HttpHeaders{Headers: headerList(kv...), EndOfStream: eos}}}
}

// post is the request headers of an inference POST.
func post(pc *extprocv3.ProtocolConfiguration, path string, kv ...string) *extprocv3.ProcessingRequest {
	return requestHeaders(pc, false, append([]string{":method", "POST", ":path", path, ":authority", "gw", ":scheme", "http",
		"content-type", "application/json", "x-request-id", "req-1"}, kv...)...)
}

func requestBody(b []byte, eos bool) *extprocv3.ProcessingRequest {
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{RequestBody: &extprocv3.HttpBody{Body: b, EndOfStream: eos}}}
}

func requestTrailers() *extprocv3.ProcessingRequest {
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestTrailers{RequestTrailers: &extprocv3.HttpTrailers{Trailers: headerList("x-t", "1")}}}
}

func responseHeaders(eos bool, kv ...string) *extprocv3.ProcessingRequest {
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseHeaders{
		ResponseHeaders: &extprocv3.HttpHeaders{Headers: headerList(kv...), EndOfStream: eos}}}
}

func responseBody(b []byte, eos bool) *extprocv3.ProcessingRequest {
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{ResponseBody: &extprocv3.HttpBody{Body: b, EndOfStream: eos}}}
}

func responseTrailers() *extprocv3.ProcessingRequest {
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseTrailers{ResponseTrailers: &extprocv3.HttpTrailers{Trailers: headerList("x-t", "1")}}}
}

// split cuts b into n chunks (the last takes the rest).
func split(b []byte, n int) [][]byte {
	var out [][]byte
	size := len(b) / n
	for i := range n - 1 {
		out = append(out, b[i*size:(i+1)*size])
	}
	return append(out, b[(n-1)*size:])
}

// setOf returns a header mutation's set headers by name (the last value
// of each) and its removed names.
func setOf(m *extprocv3.HeaderMutation) (set map[string]string, removed []string) {
	set = map[string]string{}
	for _, h := range m.GetSetHeaders() {
		v := h.GetHeader().GetValue()
		if raw := h.GetHeader().GetRawValue(); len(raw) > 0 {
			v = string(raw)
		}
		set[strings.ToLower(h.GetHeader().GetKey())] = v
	}
	return set, m.GetRemoveHeaders()
}

// metadataDestination returns envoy.lb/x-gateway-destination-endpoint.
func metadataDestination(r *extprocv3.ProcessingResponse) string {
	return r.GetDynamicMetadata().GetFields()[DestinationNamespace].GetStructValue().GetFields()[DestinationHeader].GetStringValue()
}

// streamsCount returns hermod_picker_extproc_streams_total{outcome}.
func (e *testEnv) streamsCount(outcome string) float64 {
	return testutil.ToFloat64(e.m.streams.WithLabelValues(outcome))
}

// immediateCount returns hermod_picker_extproc_immediate_responses_total{code}.
func (e *testEnv) immediateCount(code int) float64 {
	return testutil.ToFloat64(e.m.immediate.WithLabelValues(strconv.Itoa(code)))
}

// waitCompletions waits until n completions came.
func (e *testEnv) waitCompletions(n int) {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(e.done.all()) < n {
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out waiting for %d completions (have %d)", n, len(e.done.all()))
		}
		time.Sleep(time.Millisecond)
	}
}

// waitStreams waits until n streams ended with outcome.
func (e *testEnv) waitStreams(outcome string, n float64) {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for e.streamsCount(outcome) < n {
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out waiting for %v %s streams (have %v)", n, outcome, e.streamsCount(outcome))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func subsetMetadata(items ...string) *corev3.Metadata {
	vals := make([]any, len(items))
	for i, s := range items {
		vals[i] = s
	}
	list, _ := structpb.NewList(vals)
	return &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{
		SubsetNamespace: {Fields: map[string]*structpb.Value{SubsetKey: structpb.NewListValue(list)}},
	}}
}
