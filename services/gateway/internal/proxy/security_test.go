package proxy

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	"github.com/hermod/hermod/libs/openai"
	"github.com/hermod/hermod/services/gateway/internal/pickerclient"
)

// clientRouting are routing headers a client may try to set itself.
var clientRouting = map[string]string{
	"Mif-Prefill-Endpoint":                  "169.254.169.254:80",
	"Mif-Encode-Endpoints":                  "10.6.6.6:1",
	"Mif-Future-Header":                     "x",
	"X-Gateway-Destination-Endpoint":        "10.6.6.6:1",
	"X-Gateway-Destination-Endpoint-Subset": "10.6.6.6:1",
	"X-Gateway-Destination-Endpoint-Served": "10.6.6.6:1",
	"X-Decoder-Host-Port":                   "10.6.6.6:1",
	"X-Prefiller-Host-Port":                 "169.254.169.254:80",
	"X-Prefiller-Url":                       "http://169.254.169.254/",
	"X-Data-Parallel-Host-Port":             "10.6.6.6:1",
	"X-Llm-D-Request-Dropped-Reason":        "x",
}

// A client's copies of the routing headers only Hermod sets never reach
// the model server nor the picker's plugins, whatever the configuration;
// the picker's own headers do. Cookies, proxy headers and the hop-by-hop
// ones stay on the gateway's hop unless --forward-headers names them.
func TestClientRoutingHeadersAreStripped(t *testing.T) {
	for _, forward := range [][]string{nil, {"cookie", "Proxy-Authorization"}} {
		var got http.Header
		up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			got = r.Header.Clone()
			_, _ = io.WriteString(w, `{}`)
		}))
		g := newGatewayWith(t, func(o *Options) { o.ForwardHeaders = forward }, hostPort(up.URL))
		req, _ := http.NewRequest(http.MethodPost, g.url+"/v1/completions", strings.NewReader(`{"prompt":"x"}`))
		for k, v := range clientRouting {
			req.Header.Set(k, v)
		}
		req.Header.Set("Cookie", "session=abc")
		req.Header.Set("Proxy-Authorization", "Basic eA==")
		req.Header.Set("Te", "trailers")
		req.Header.Set("Upgrade", "h2c")
		req.Header.Set("X-Session-Token", "cG9kLTA=")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		up.Close()
		for k := range clientRouting {
			if v := got.Get(k); v != "" && (k != "Mif-Prefill-Endpoint" || v != "10.1.1.1:8000") {
				t.Errorf("forward %v: the client's %s reached the pod: %q", forward, k, v)
			}
			if v, ok := g.picker.reqs[0].GetHeaders()[strings.ToLower(k)]; ok {
				t.Errorf("forward %v: the client's %s reached the picker: %q", forward, k, v)
			}
		}
		if got.Get("Mif-Prefill-Endpoint") != "10.1.1.1:8000" {
			t.Errorf("the picker's mif-prefill-endpoint is missing: %v", got)
		}
		if got.Get("Te") != "" || got.Get("Upgrade") != "" || got.Get("X-Session-Token") != "cG9kLTA=" {
			t.Errorf("hop-by-hop or client headers: %v", got)
		}
		wantCookie := ""
		if forward != nil {
			wantCookie = "session=abc"
		}
		if got.Get("Cookie") != wantCookie || (got.Get("Proxy-Authorization") != "") == (forward == nil) {
			t.Errorf("forward %v: Cookie %q, Proxy-Authorization %q", forward, got.Get("Cookie"), got.Get("Proxy-Authorization"))
		}
	}
}

func TestCheckForwardHeaders(t *testing.T) {
	for _, c := range []struct {
		names []string
		ok    bool
	}{
		{[]string{"Cookie", "proxy-authorization", "X-Custom"}, true},
		{[]string{"mif-prefill-endpoint"}, false},
		{[]string{"X-Gateway-Destination-Endpoint-Subset"}, false},
		{[]string{"Transfer-Encoding"}, false},
		{[]string{"connection"}, false},
		{[]string{" "}, false},
	} {
		if err := CheckForwardHeaders(c.names); (err == nil) != c.ok {
			t.Errorf("CheckForwardHeaders(%q) = %v", c.names, err)
		}
	}
}

// A picker that cannot be reached is logged with its address; the client
// gets a 503 naming no address, with the request id.
func TestPickErrorsNameNoAddress(t *testing.T) {
	dead := deadAddress(t)
	pc, err := pickerclient.New([]string{dead}, pickerclient.Options{PickTimeout: 2 * time.Second,
		DialOptions: []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	h := New(Options{Pool: "pool", Picker: pc, Reporter: &fakeReporter{got: make(chan struct{}, 1)}, Logger: quiet})
	srv := httptest.NewServer(h.Completions(openai.APICompletions))
	defer srv.Close()
	resp, err := http.Post(srv.URL, "application/json", strings.NewReader(`{"prompt":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	id := resp.Header.Get(RequestIDHeader)
	if resp.StatusCode != http.StatusServiceUnavailable || id == "" || !strings.Contains(string(b), id) {
		t.Errorf("%d %s (request id %q)", resp.StatusCode, b, id)
	}
	for _, leak := range []string{"127.0.0.1", dead, "dial", "tcp"} {
		if strings.Contains(string(b), leak) {
			t.Errorf("the answer names %q: %s", leak, b)
		}
	}
}

// A stream whose model server dies mid-generation, or ends it without
// [DONE], ends with an OpenAI error event, not with what looks like a
// short answer; a whole stream has none.
func TestBrokenStreamEndsWithAnErrorEvent(t *testing.T) {
	chunk := "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n"
	cases := []struct {
		name string
		tail string // after the first chunk; "" then hijack: the connection drops
		cut  bool
		want eventsv1.CompletionOutcome
	}{
		{"the pod dies", "", true, eventsv1.CompletionOutcome_COMPLETION_OUTCOME_FAILED},
		{"the pod dies inside an event", "data: {\"choices\":[{\"del", true, eventsv1.CompletionOutcome_COMPLETION_OUTCOME_FAILED},
		{"the stream ends without [DONE]", "data: {\"choices\":[{\"delta\":{\"content\":\"b\"}}]}\n\n", false, eventsv1.CompletionOutcome_COMPLETION_OUTCOME_FAILED},
		{"whole", "data: [DONE]\n\n", false, eventsv1.CompletionOutcome_COMPLETION_OUTCOME_SUCCESS},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = io.WriteString(w, chunk+c.tail)
				w.(http.Flusher).Flush()
				if c.cut {
					if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
						_ = conn.Close()
					}
				}
			}))
			defer up.Close()
			g := newGateway(t, hostPort(up.URL))
			resp, err := http.Post(g.url+"/v1/chat/completions", "application/json",
				strings.NewReader(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
			if err != nil {
				t.Fatal(err)
			}
			var events []string
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				if line := sc.Text(); line != "" {
					events = append(events, line)
				}
			}
			resp.Body.Close()
			last := events[len(events)-1]
			ev := g.reporter.wait(t, 1)[0]
			if ev.GetOutcome() != c.want {
				t.Errorf("outcome %v, want %v", ev.GetOutcome(), c.want)
			}
			if c.want == eventsv1.CompletionOutcome_COMPLETION_OUTCOME_SUCCESS {
				if last != "data: [DONE]" {
					t.Errorf("a whole stream ends with %q", last)
				}
				return
			}
			var e struct {
				Error struct{ Message, Type, Code string }
			}
			data, ok := strings.CutPrefix(last, "data: ")
			if !ok || json.Unmarshal([]byte(data), &e) != nil || e.Error.Type != openai.TypeServer || e.Error.Code != "stream_interrupted" ||
				!strings.Contains(e.Error.Message, resp.Header.Get(RequestIDHeader)) || strings.Contains(e.Error.Message, "127.0.0.1") {
				t.Fatalf("the stream ends with %q, want an OpenAI error event", last)
			}
			for _, line := range events[:len(events)-1] {
				if data, ok := strings.CutPrefix(line, "data: "); ok && !json.Valid([]byte(data)) {
					t.Errorf("an incomplete event was passed on: %q", line)
				}
			}
		})
	}
}
