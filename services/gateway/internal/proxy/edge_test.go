package proxy

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	pickerv1 "github.com/hermod/hermod/libs/api/hermod/picker/v1"
	"github.com/hermod/hermod/libs/openai"
	"github.com/hermod/hermod/services/gateway/internal/pickerclient"
)

type panicTransport struct{}

func (panicTransport) RoundTrip(*http.Request) (*http.Response, error) { panic("boom") }

// A panic on the request path still reports the routed request, as failed.
func TestPanicIsReportedAsFailed(t *testing.T) {
	g := newGatewayWith(t, func(o *Options) { o.Transport = panicTransport{} }, "127.0.0.1:1")
	resp, err := http.Post(g.url+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"x"}`))
	if err == nil {
		resp.Body.Close()
	}
	ev := g.reporter.wait(t, 1)[0]
	if ev.GetOutcome() != eventsv1.CompletionOutcome_COMPLETION_OUTCOME_FAILED || !strings.Contains(ev.GetError(), "panic") {
		t.Errorf("completion %v", ev)
	}
	if got := testutil.ToFloat64(g.metrics.inflight); got != 0 {
		t.Errorf("in flight after a panic: %v", got)
	}
}

// blockingPicker decides only once released.
type blockingPicker struct {
	release chan struct{}
	err     error
}

func (p *blockingPicker) Pick(ctx context.Context, _ *pickerv1.PickRequest) (pickerclient.Decision, error) {
	select {
	case <-p.release:
	case <-ctx.Done():
		return pickerclient.Decision{}, ctx.Err()
	}
	if p.err != nil {
		return pickerclient.Decision{}, p.err
	}
	return pickerclient.Decision{PickResponse: &pickerv1.PickResponse{DecisionId: "00000000000000aa",
		Targets: []*pickerv1.Target{{Name: "pod", Address: "127.0.0.1:1"}}}}, nil
}

// A client that leaves while the picker decides: the decision is still
// completed (canceled), so its in-flight count drops.
func TestClientGoneDuringThePick(t *testing.T) {
	bp := &blockingPicker{release: make(chan struct{})}
	r := &fakeReporter{got: make(chan struct{}, 1)}
	h := New(Options{Pool: "pool", Picker: bp, Reporter: r, Logger: quiet})
	srv := httptest.NewServer(h.Completions(openai.APICompletions))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, strings.NewReader(`{"prompt":"x"}`))
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	time.Sleep(50 * time.Millisecond)
	cancel()
	<-done
	time.Sleep(50 * time.Millisecond) // the server sees the connection close
	close(bp.release)
	ev := r.wait(t, 1)[0]
	if ev.GetDecisionId() != "00000000000000aa" || ev.GetOutcome() != eventsv1.CompletionOutcome_COMPLETION_OUTCOME_CANCELED {
		t.Errorf("completion %v", ev)
	}
}

// A picker that answers Canceled while the client waits: 503, not an empty
// 200.
func TestPickerCanceledIs503(t *testing.T) {
	bp := &blockingPicker{release: make(chan struct{}), err: status.Error(codes.Canceled, "picker shutting down")}
	close(bp.release)
	h := New(Options{Pool: "pool", Picker: bp, Reporter: &fakeReporter{got: make(chan struct{}, 1)}, Logger: quiet})
	srv := httptest.NewServer(h.Completions(openai.APICompletions))
	defer srv.Close()
	resp, err := http.Post(srv.URL, "application/json", strings.NewReader(`{"prompt":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Errorf("status %d", resp.StatusCode)
	}
}

func TestHeadersOnTheWay(t *testing.T) {
	var got http.Header
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		w.Header().Set("Connection", "X-Up-Hop")
		w.Header().Set("X-Up-Hop", "1")
		w.Header().Set("X-Engine", "vllm")
		_, _ = io.WriteString(w, `{}`)
	}))
	defer up.Close()
	g := newGateway(t, hostPort(up.URL))
	req, _ := http.NewRequest(http.MethodPost, g.url+"/v1/completions", strings.NewReader(`{"prompt":"x"}`))
	req.Header.Set("Connection", "X-Hop")
	req.Header.Set("X-Hop", "secret")
	req.Header.Set("Accept-Encoding", "gzip")
	req.Header.Set("X-Request-Id", strings.Repeat("x", 200)) // too long: replaced
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got.Get("X-Hop") != "" || got.Get("Accept-Encoding") != "" || len(got.Get("X-Request-Id")) != 32 {
		t.Errorf("upstream headers %v", got)
	}
	if resp.Header.Get("X-Up-Hop") != "" || resp.Header.Get("X-Engine") != "vllm" || resp.Header.Get("X-Request-Id") != got.Get("X-Request-Id") {
		t.Errorf("client headers %v", resp.Header)
	}
}

// The client gets a stream's headers before its first event, events split
// across reads pass whole, and a stream cut short keeps its accounting.
func TestStreamTimingAndPartialAccounting(t *testing.T) {
	first := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		<-first
		_, _ = io.WriteString(w, ": ping\n\n")
		_, _ = io.WriteString(w, "data: {\"choices\":[{\"text\":\"a")
		w.(http.Flusher).Flush()
		time.Sleep(20 * time.Millisecond)
		_, _ = io.WriteString(w, "b\"}]}\n\n")
		w.(http.Flusher).Flush()
		for i := 0; ; i++ {
			if _, err := fmt.Fprintf(w, "data: {\"choices\":[{\"text\":\"%d\"}]}\n\n", i); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}))
	defer up.Close()
	g := newGateway(t, hostPort(up.URL))
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, g.url+"/v1/completions", strings.NewReader(`{"prompt":"x","stream":true}`))
	resp, err := http.DefaultClient.Do(req) // returns with the headers
	if err != nil {
		t.Fatal(err)
	}
	close(first)
	br := bufio.NewReader(resp.Body)
	var lines []string
	for len(lines) < 6 {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(line, "data:") {
			lines = append(lines, line)
		}
	}
	if lines[0] != "data: {\"choices\":[{\"text\":\"ab\"}]}\n" {
		t.Errorf("split event arrived as %q", lines[0])
	}
	cancel()
	resp.Body.Close()
	ev := g.reporter.wait(t, 1)[0]
	if ev.GetOutcome() != eventsv1.CompletionOutcome_COMPLETION_OUTCOME_CANCELED || ev.GetCompletionTokens() < 6 || ev.GetTtft().AsDuration() < 15*time.Millisecond {
		t.Errorf("completion %v", ev)
	}
}

// The usage of a non-streamed answer larger than the tail kept is read
// from the tail.
func TestUsageOfALargeAnswer(t *testing.T) {
	text := strings.Repeat("word ", 1<<20) // 5 MiB
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, `{"choices":[{"text":"`+text+`"}],`+usageJSON+`}`)
	}))
	defer up.Close()
	g := newGateway(t, hostPort(up.URL))
	resp, err := http.Post(g.url+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	n, _ := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if n < 5<<20 {
		t.Fatalf("body %d bytes", n)
	}
	if ev := g.reporter.wait(t, 1)[0]; ev.GetPromptTokens() != 7 || ev.GetCompletionTokens() != 3 {
		t.Errorf("completion %v", ev)
	}
}

// Every request gets the gateway's own id, whatever the client sends; a
// valid client id is kept beside it as X-Client-Request-Id.
func TestRequestIDs(t *testing.T) {
	var seen []http.Header
	var mu sync.Mutex
	h := RequestIDs(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Clone())
		mu.Unlock()
		http.Error(w, "no", http.StatusUnauthorized)
	}))
	ids := map[string]bool{}
	for i, c := range []struct{ in, client string }{{"abc-123", "abc-123"}, {"abc-123", "abc-123"}, {"", ""}, {"bad id", ""}, {strings.Repeat("a", 129), ""}} {
		r := httptest.NewRequest(http.MethodPost, "/v1/completions", nil)
		if c.in != "" {
			r.Header.Set(RequestIDHeader, c.in)
		}
		r.Header.Set(ClientRequestIDHeader, "forged") // never passed on as such
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		got := w.Header().Get(RequestIDHeader)
		if len(got) != 32 || ids[got] || seen[i].Get(RequestIDHeader) != got {
			t.Errorf("%q: id %q (seen before: %v; handler saw %q)", c.in, got, ids[got], seen[i].Get(RequestIDHeader))
		}
		ids[got] = true
		if w.Header().Get(ClientRequestIDHeader) != c.client || seen[i].Get(ClientRequestIDHeader) != c.client {
			t.Errorf("%q: client id %q on the response, %q upstream; want %q", c.in, w.Header().Get(ClientRequestIDHeader), seen[i].Get(ClientRequestIDHeader), c.client)
		}
	}
}
