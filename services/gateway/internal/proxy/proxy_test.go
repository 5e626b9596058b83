package proxy

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	pickerv1 "github.com/hermod/hermod/libs/api/hermod/picker/v1"
	"github.com/hermod/hermod/libs/openai"
	"github.com/hermod/hermod/services/gateway/internal/flowcontrol"
	"github.com/hermod/hermod/services/gateway/internal/pickerclient"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

type fakePicker struct {
	mu      sync.Mutex
	targets []string
	err     error
	reqs    []*pickerv1.PickRequest
}

func (p *fakePicker) Pick(_ context.Context, req *pickerv1.PickRequest) (pickerclient.Decision, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reqs = append(p.reqs, req)
	if p.err != nil {
		return pickerclient.Decision{}, p.err
	}
	out := &pickerv1.PickResponse{DecisionId: fmt.Sprintf("%016x", len(p.reqs)),
		Headers: map[string]string{"mif-prefill-endpoint": "10.1.1.1:8000"}, RemoveHeaders: []string{"x-gateway-destination-endpoint"}}
	for i, t := range p.targets {
		out.Targets = append(out.Targets, &pickerv1.Target{Name: fmt.Sprintf("pod-%d", i), Address: t,
			ResponseHeaders: map[string]string{"x-decoder-host-port": t}})
	}
	return pickerclient.Decision{PickResponse: out}, nil
}

type fakeReporter struct {
	mu  sync.Mutex
	evs []*eventsv1.RequestCompleted
	got chan struct{}
	// publishes: PublishesDecisions; calls: "decided <id>" and
	// "completed <id>" in the order made.
	publishes bool
	calls     []string
}

func (r *fakeReporter) PublishesDecisions() bool { return r.publishes }

func (r *fakeReporter) Decided(d pickerclient.Decision) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, "decided "+d.GetDecisionId())
}

func (r *fakeReporter) Report(_ pickerclient.Decision, ev *eventsv1.RequestCompleted) {
	r.mu.Lock()
	r.evs = append(r.evs, ev)
	r.calls = append(r.calls, "completed "+ev.GetDecisionId())
	r.mu.Unlock()
	select {
	case r.got <- struct{}{}:
	default:
	}
}

func (r *fakeReporter) events() []*eventsv1.RequestCompleted {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*eventsv1.RequestCompleted(nil), r.evs...)
}

// wait waits for n completions.
func (r *fakeReporter) wait(t *testing.T, n int) []*eventsv1.RequestCompleted {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for len(r.events()) < n && time.Now().Before(deadline) {
		select {
		case <-r.got:
		case <-time.After(10 * time.Millisecond):
		}
	}
	evs := r.events()
	if len(evs) != n {
		t.Fatalf("%d completions, want %d", len(evs), n)
	}
	return evs
}

type gw struct {
	url      string
	picker   *fakePicker
	reporter *fakeReporter
	metrics  *Metrics
	flow     *flowcontrol.Controller // with flowGateway
}

// flowQueued is how many requests wait in the gateway's queue.
func (g *gw) flowQueued() int { return g.flow.Queued() }

func newGateway(t testing.TB, targets ...string) *gw {
	t.Helper()
	return newGatewayWith(t, nil, targets...)
}

func newGatewayWith(t testing.TB, edit func(*Options), targets ...string) *gw {
	t.Helper()
	p := &fakePicker{targets: targets}
	r := &fakeReporter{got: make(chan struct{}, 1)}
	m := NewMetrics(nil)
	o := Options{Pool: "pool", Replica: "gw-1", Picker: p, Reporter: r, Logger: quiet, Metrics: m, MaxBodyBytes: 1 << 20}
	if edit != nil {
		edit(&o)
	}
	h := New(o)
	mux := http.NewServeMux()
	mux.Handle("POST /v1/completions", h.Completions(openai.APICompletions))
	mux.Handle("POST /v1/chat/completions", h.Completions(openai.APIChatCompletions))
	mux.Handle("POST /v1/messages", h.Completions(openai.APIMessages))
	mux.Handle("POST /v1/messages/count_tokens", h.Completions(openai.APIMessagesCountTokens))
	mux.Handle("POST /inference/v1/generate", h.Completions(openai.APIGenerate))
	for _, path := range openai.PassthroughPaths {
		mux.Handle("POST "+path, h.Completions(openai.APIPassthrough))
	}
	srv := httptest.NewServer(RequestIDs(mux))
	t.Cleanup(srv.Close)
	return &gw{url: srv.URL, picker: p, reporter: r, metrics: m}
}

func hostPort(u string) string { return strings.TrimPrefix(u, "http://") }

// deadAddress is a loopback address nothing listens on.
func deadAddress(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

const usageJSON = `"usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10,"prompt_tokens_details":{"cached_tokens":4}}`

func TestNonStreamedRequest(t *testing.T) {
	var upstreamHeaders http.Header
	var upstreamBody []byte
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		upstreamHeaders = r.Header.Clone()
		upstreamBody, _ = io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"cmpl-1","choices":[{"text":"a b c"}],`+usageJSON+`}`)
	}))
	defer up.Close()
	g := newGateway(t, hostPort(up.URL))
	body := `{"model":"llama","prompt":"hello"}`
	req, _ := http.NewRequest(http.MethodPost, g.url+"/v1/completions", strings.NewReader(body))
	req.Header.Set("X-Request-Id", "client-id-1")
	req.Header.Set("X-Gateway-Destination-Endpoint", "10.6.6.6:1")
	req.Header.Set("X-Session-Token", "cG9kLTA=")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(got), "cmpl-1") {
		t.Fatalf("%d %s", resp.StatusCode, got)
	}
	// the gateway's own id, the client's kept beside it
	id := resp.Header.Get("X-Request-Id")
	if len(id) != 32 || resp.Header.Get("X-Client-Request-Id") != "client-id-1" || resp.Header.Get("X-Decoder-Host-Port") != hostPort(up.URL) {
		t.Errorf("response headers %v", resp.Header)
	}
	if string(upstreamBody) != body || upstreamHeaders.Get("X-Request-Id") != id || upstreamHeaders.Get("X-Client-Request-Id") != "client-id-1" ||
		upstreamHeaders.Get("Mif-Prefill-Endpoint") != "10.1.1.1:8000" || upstreamHeaders.Get("X-Gateway-Destination-Endpoint") != "" {
		t.Errorf("upstream got %s %v", upstreamBody, upstreamHeaders)
	}
	pr := g.picker.reqs[0]
	if pr.GetRequestId() != id || pr.GetPool() != "pool" || len(pr.GetBody()) != 0 || pr.GetRequest().GetModel() != "llama" || pr.GetRequest().GetPrompt() != "hello" || pr.GetHeaders()["x-session-token"] != "cG9kLTA=" {
		t.Errorf("pick request %v", pr)
	}
	ev := g.reporter.wait(t, 1)[0]
	if ev.GetOutcome() != eventsv1.CompletionOutcome_COMPLETION_OUTCOME_SUCCESS || ev.GetStatusCode() != 200 || ev.GetAttempts() != 1 ||
		ev.GetPromptTokens() != 7 || ev.GetCompletionTokens() != 3 || ev.GetCachedTokens() != 4 || ev.GetEndpointName() != "pod-0" ||
		ev.GetDecisionId() != "0000000000000001" || ev.GetRequestId() != id || ev.GetModel() != "llama" || ev.GetTtft() == nil ||
		ev.GetTpot() != nil || ev.GetReporter() != "gw-1" || ev.GetStreamed() {
		t.Errorf("completion %v", ev)
	}
}

// TestDecisionIsReportedBeforeItsCompletion: a gateway whose reporter
// publishes decisions asks the picker for them and hands each over as soon
// as the Pick answered, ahead of the completion; one that does not, does
// not ask.
func TestDecisionIsReportedBeforeItsCompletion(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"cmpl-1","choices":[{"text":"a"}],`+usageJSON+`}`)
	}))
	defer up.Close()
	for _, publishes := range []bool{true, false} {
		g := newGateway(t, hostPort(up.URL))
		g.reporter.publishes = publishes
		for range 2 {
			resp, err := http.Post(g.url+"/v1/completions", "application/json", strings.NewReader(`{"model":"llama","prompt":"hello"}`))
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d", resp.StatusCode)
			}
		}
		g.reporter.wait(t, 2)
		for _, pr := range g.picker.reqs {
			if pr.GetCallerPublishesDecision() != publishes {
				t.Errorf("publishes %v: pick request asks for the decision: %v", publishes, pr.GetCallerPublishesDecision())
			}
		}
		g.reporter.mu.Lock()
		calls := strings.Join(g.reporter.calls, ", ")
		g.reporter.mu.Unlock()
		// Decided is called either way: the reporter publishes only the
		// events handed over.
		if want := "decided 0000000000000001, completed 0000000000000001, decided 0000000000000002, completed 0000000000000002"; calls != want {
			t.Errorf("publishes %v: calls %s, want %s", publishes, calls, want)
		}
	}
}

func TestStreamPassesThroughAndHidesTheUsageChunk(t *testing.T) {
	release := make(chan struct{})
	var upstreamBody []byte
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		upstreamBody, _ = io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		_, _ = io.WriteString(w, "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n")
		fl.Flush()
		<-release // the client must see the first event before the rest exists
		_, _ = io.WriteString(w, "data: {\"choices\":[{\"delta\":{\"content\":\"b\"}}]}\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"c\"}}]}\n\n")
		_, _ = io.WriteString(w, "data: {\"choices\":[],"+usageJSON+"}\n\n")
		_, _ = io.WriteString(w, "data: [DONE]\n\n")
	}))
	defer up.Close()
	g := newGateway(t, hostPort(up.URL))
	resp, err := http.Post(g.url+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"llama","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rd := bufio.NewReader(resp.Body)
	line, err := rd.ReadString('\n')
	if err != nil || !strings.Contains(line, `"content":"a"`) {
		t.Fatalf("first event: %q %v", line, err)
	}
	close(release)
	rest, _ := io.ReadAll(rd)
	if strings.Contains(string(rest), "usage") || !strings.Contains(string(rest), `"content":"c"`) || !strings.HasSuffix(string(rest), "data: [DONE]\n\n") {
		t.Errorf("rest of the stream:\n%s", rest)
	}
	var sent map[string]any
	_ = json.Unmarshal(upstreamBody, &sent)
	if opts, _ := sent["stream_options"].(map[string]any); opts["include_usage"] != true {
		t.Errorf("upstream body %s", upstreamBody)
	}
	ev := g.reporter.wait(t, 1)[0]
	if ev.GetOutcome() != eventsv1.CompletionOutcome_COMPLETION_OUTCOME_SUCCESS || !ev.GetStreamed() || ev.GetCompletionTokens() != 3 || ev.GetPromptTokens() != 7 {
		t.Errorf("completion %v", ev)
	}
}

func TestStreamKeepsTheUsageChunkTheClientAskedFor(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: {\"choices\":[{\"text\":\"a\"}]}\r\n\r\ndata: {\"choices\":[],"+usageJSON+"}\r\n\r\ndata: [DONE]\r\n\r\n")
	}))
	defer up.Close()
	g := newGateway(t, hostPort(up.URL))
	resp, err := http.Post(g.url+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"hi","stream":true,"stream_options":{"include_usage":true}}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), `"completion_tokens":3`) {
		t.Errorf("usage chunk missing:\n%s", b)
	}
	if ev := g.reporter.wait(t, 1)[0]; ev.GetCompletionTokens() != 3 {
		t.Errorf("completion %v", ev)
	}
}

func TestFallbackBeforeTheFirstByte(t *testing.T) {
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "engine dead", http.StatusServiceUnavailable)
	}))
	defer failing.Close()
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, `{"choices":[]}`)
	}))
	defer ok.Close()
	g := newGateway(t, deadAddress(t), hostPort(failing.URL), hostPort(ok.URL))
	resp, err := http.Post(g.url+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Decoder-Host-Port") != hostPort(ok.URL) {
		t.Fatalf("status %d served by %s", resp.StatusCode, resp.Header.Get("X-Decoder-Host-Port"))
	}
	ev := g.reporter.wait(t, 1)[0]
	if ev.GetAttempts() != 3 || ev.GetEndpoint() != hostPort(ok.URL) || ev.GetOutcome() != eventsv1.CompletionOutcome_COMPLETION_OUTCOME_SUCCESS {
		t.Errorf("completion %v", ev)
	}

	// Every endpoint failing: 502 in the OpenAI shape, a failed completion.
	g = newGateway(t, deadAddress(t), deadAddress(t))
	resp, err = http.Post(g.url+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(b), `"type":"server_error"`) {
		t.Errorf("%d %s", resp.StatusCode, b)
	}
	if ev := g.reporter.wait(t, 1)[0]; ev.GetOutcome() != eventsv1.CompletionOutcome_COMPLETION_OUTCOME_FAILED || ev.GetAttempts() != 2 || ev.GetStatusCode() != 502 {
		t.Errorf("completion %v", ev)
	}

	// The last endpoint's server error goes to the client as it is.
	g = newGateway(t, hostPort(failing.URL))
	resp, _ = http.Post(g.url+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"x"}`))
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("single failing endpoint: %d", resp.StatusCode)
	}
	if ev := g.reporter.wait(t, 1)[0]; ev.GetOutcome() != eventsv1.CompletionOutcome_COMPLETION_OUTCOME_UPSTREAM_ERROR {
		t.Errorf("completion %v", ev)
	}
}

func TestRefusedRequests(t *testing.T) {
	g := newGateway(t, "127.0.0.1:1")
	cases := []struct {
		body    string
		pickErr error
		code    int
		errType string
	}{
		{`{"prompt":`, nil, 400, "invalid_request_error"},
		{`{"model":7,"prompt":"x"}`, nil, 400, "invalid_request_error"},
		{`{"prompt":"` + strings.Repeat("x", 2<<20) + `"}`, nil, 413, "invalid_request_error"},
		{`{"model":"gpt","prompt":"x"}`, status.Error(codes.NotFound, "the model `gpt` does not exist"), 404, "not_found_error"},
		{`{"prompt":"x"}`, status.Error(codes.Unavailable, "no ready endpoints"), 503, "service_unavailable"},
		{`{"prompt":"x"}`, status.Error(codes.ResourceExhausted, "shed"), 429, "rate_limit_error"},
		{`{"prompt":"x"}`, status.Error(codes.InvalidArgument, "prompt: required"), 400, "invalid_request_error"},
		{`{"prompt":"x"}`, status.Error(codes.Internal, "boom"), 500, "server_error"},
	}
	for _, c := range cases {
		g.picker.mu.Lock()
		g.picker.err = c.pickErr
		g.picker.mu.Unlock()
		resp, err := http.Post(g.url+"/v1/completions", "application/json", strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.code || !strings.Contains(string(b), `"type":"`+c.errType+`"`) || resp.Header.Get("X-Request-Id") == "" {
			t.Errorf("%.30s: %d %s", c.body, resp.StatusCode, b)
		}
		if (c.code == 503 || c.code == 429) && resp.Header.Get("Retry-After") == "" {
			t.Errorf("%d without Retry-After", c.code)
		}
	}
	if n := len(g.reporter.events()); n != 0 {
		t.Errorf("%d completions for requests that were never routed", n)
	}
}

// A client that goes away mid-stream ends its request as canceled, reported
// once, and the endpoint's request is canceled too.
func TestClientGoneMidStream(t *testing.T) {
	upstreamDone := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(upstreamDone)
		w.Header().Set("Content-Type", "text/event-stream")
		for i := 0; ; i++ {
			if _, err := fmt.Fprintf(w, "data: {\"choices\":[{\"text\":\"%d\"}]}\n\n", i); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}))
	defer up.Close()
	g := newGateway(t, hostPort(up.URL))
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, g.url+"/v1/completions", strings.NewReader(`{"prompt":"x","stream":true}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = bufio.NewReader(resp.Body).ReadString('\n')
	cancel()
	resp.Body.Close()
	select {
	case <-upstreamDone:
	case <-time.After(5 * time.Second):
		t.Fatal("the endpoint's request was not canceled")
	}
	ev := g.reporter.wait(t, 1)[0]
	if ev.GetOutcome() != eventsv1.CompletionOutcome_COMPLETION_OUTCOME_CANCELED || ev.GetStatusCode() != 0 {
		t.Errorf("completion %v", ev)
	}
	time.Sleep(50 * time.Millisecond)
	if n := len(g.reporter.events()); n != 1 {
		t.Errorf("%d completions", n)
	}
}

// An endpoint that dies mid-stream fails the request (no retry after the
// first byte), reported once.
func TestEndpointDiesMidStream(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: {\"choices\":[{\"text\":\"a\"}]}\n\n")
		w.(http.Flusher).Flush()
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			_ = conn.Close()
		}
	}))
	defer up.Close()
	g := newGateway(t, hostPort(up.URL), hostPort(up.URL))
	resp, err := http.Post(g.url+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"x","stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	ev := g.reporter.wait(t, 1)[0]
	if ev.GetOutcome() != eventsv1.CompletionOutcome_COMPLETION_OUTCOME_FAILED || ev.GetAttempts() != 1 {
		t.Errorf("completion %v", ev)
	}
}

// An endpoint that takes the request and never answers is given up after
// the first-byte timeout, and the next target serves the request.
func TestFirstByteTimeout(t *testing.T) {
	release := make(chan struct{})
	silent := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-release }))
	defer silent.Close()
	defer close(release)
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, `{"choices":[]}`)
	}))
	defer ok.Close()
	g := newGatewayWith(t, func(o *Options) { o.Transport = NewTransport(false, 200*time.Millisecond) }, hostPort(silent.URL), hostPort(ok.URL))
	start := time.Now()
	resp, err := http.Post(g.url+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Decoder-Host-Port") != hostPort(ok.URL) {
		t.Fatalf("status %d served by %s", resp.StatusCode, resp.Header.Get("X-Decoder-Host-Port"))
	}
	if took := time.Since(start); took < 200*time.Millisecond || took > 10*time.Second {
		t.Fatalf("answered after %s with a 200ms first-byte timeout", took)
	}
	if ev := g.reporter.wait(t, 1)[0]; ev.GetAttempts() != 2 || ev.GetEndpoint() != hostPort(ok.URL) {
		t.Errorf("completion %v", ev)
	}
	// the only endpoint silent: 502 once the timeout passed
	g = newGatewayWith(t, func(o *Options) { o.Transport = NewTransport(false, 200*time.Millisecond) }, hostPort(silent.URL))
	resp, err = http.Post(g.url+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("a silent endpoint: %d", resp.StatusCode)
	}
}
