package proxy

import (
	"context"
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

	"github.com/hermod/hermod/services/gateway/internal/flowcontrol"
)

// slowUpstream answers after release is closed.
func slowUpstream(t *testing.T) (string, chan struct{}) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-release
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"x","object":"text_completion","choices":[{"index":0,"text":"ok","finish_reason":"stop"}]}`)
	}))
	t.Cleanup(srv.Close)
	return hostPort(srv.URL), release
}

func flowGateway(t *testing.T, cfg string, target string, tune ...func(*flowcontrol.Config)) *gw {
	t.Helper()
	st, err := flowcontrol.Parse([]byte(cfg))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range tune {
		f(&st.Config)
	}
	ctrl := flowcontrol.New(st.Config, flowcontrol.NewSlots(st.MaxConcurrency, nil))
	g := newGatewayWith(t, func(o *Options) { o.Flow = &Flow{Controller: ctrl, Settings: st} }, target)
	g.flow = ctrl
	return g
}

// answer is what a client got.
type answer struct {
	code   int
	header http.Header
}

func post(t *testing.T, url string, headers map[string]string) (answer, string, time.Duration) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/completions", strings.NewReader(`{"model":"m","prompt":"x"}`))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return answer{code: resp.StatusCode, header: resp.Header}, string(b), time.Since(start)
}

func TestFlowControlShedsAndRefusesFast(t *testing.T) {
	target, release := slowUpstream(t)
	g := flowGateway(t, "maxConcurrency: 1\nobjectives: {batch: -1, chat: 5}\n", target)
	first := make(chan int, 1)
	go func() { resp, _, _ := post(t, g.url, nil); first <- resp.code }()
	deadline := time.Now().Add(5 * time.Second)
	for testutil.ToFloat64(g.metrics.inflight) < 1 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // the first holds the only slot
	resp, body, took := post(t, g.url, map[string]string{"X-Gateway-Inference-Objective": "batch"})
	if resp.code != http.StatusTooManyRequests || resp.header.Get("Retry-After") == "" || !strings.Contains(body, "sheddable") {
		t.Fatalf("sheddable on a full pool: %d %s", resp.code, body)
	}
	if got := resp.header.Get(DroppedReasonHeader); got != DroppedSaturated {
		t.Errorf("%s = %q, want %s", DroppedReasonHeader, got, DroppedSaturated)
	}
	t.Logf("shed in %v", took)
	resp, body, _ = post(t, g.url, map[string]string{"X-Gateway-Inference-Objective": "chat"})
	if resp.code != http.StatusServiceUnavailable || resp.header.Get("Retry-After") == "" {
		t.Fatalf("queueing off, full pool: %d %s", resp.code, body)
	}
	resp, body, _ = post(t, g.url, map[string]string{"X-Gateway-Inference-Objective": "nope"})
	if resp.code != http.StatusBadRequest || !strings.Contains(body, "unknown objective") {
		t.Fatalf("unknown objective: %d %s", resp.code, body)
	}
	close(release)
	if code := <-first; code != 200 {
		t.Fatalf("first request: %d", code)
	}
	// the picker sees the priority the objective resolved to
	if resp, body, _ := post(t, g.url, map[string]string{"X-Gateway-Inference-Objective": "batch"}); resp.code != http.StatusOK {
		t.Fatalf("sheddable request on an idle pool: %d %s", resp.code, body)
	}
	g.picker.mu.Lock()
	last := g.picker.reqs[len(g.picker.reqs)-1]
	g.picker.mu.Unlock()
	if got := last.GetHeaders()[PriorityHeader]; got != "-1" {
		t.Fatalf("the picker saw priority %q, want -1 (objective batch)", got)
	}
	// the picker sheds a request flow control kept: 503, not 429
	g.picker.mu.Lock()
	g.picker.err = status.Error(codes.ResourceExhausted, "every endpoint is at maxInflightPerEndpoint")
	g.picker.mu.Unlock()
	if resp, body, _ := post(t, g.url, map[string]string{"X-Gateway-Inference-Priority": "3"}); resp.code != http.StatusServiceUnavailable {
		t.Fatalf("kept request shed by the picker: %d %s", resp.code, body)
	}
	if resp, body, _ := post(t, g.url, map[string]string{"X-Gateway-Inference-Priority": "-2"}); resp.code != http.StatusTooManyRequests {
		t.Fatalf("sheddable request shed by the picker: %d %s", resp.code, body)
	}
}

func TestFlowControlQueuesUntilASlotFrees(t *testing.T) {
	target, release := slowUpstream(t)
	g := flowGateway(t, "queueing: true\nmaxConcurrency: 1\ndefaultRequestTTL: 10s\n", target)
	var wg sync.WaitGroup
	codes := make(chan int, 3)
	for range 3 {
		wg.Add(1)
		go func() { defer wg.Done(); resp, _, _ := post(t, g.url, nil); codes <- resp.code }()
	}
	time.Sleep(100 * time.Millisecond)
	close(release)
	wg.Wait()
	close(codes)
	for c := range codes {
		if c != 200 {
			t.Fatalf("a queued request got %d", c)
		}
	}
}

// Each way out of the queue answers as the llm-d router does: a TTL that
// passes while the pool has endpoints and a full band are backpressure
// (429), the wait of a pool with no endpoint running out is unavailability
// (503), each with its reason header.
func TestFlowControlDropAnswers(t *testing.T) {
	for _, tc := range []struct {
		name, cfg string
		empty     bool
		code      int
		reason    string
		body      string
	}{
		{"ttl", "queueing: true\nmaxConcurrency: 1\ndefaultRequestTTL: 50ms\n", false, http.StatusTooManyRequests, DroppedTTLExpired, "time to live"},
		{"ttl of an empty pool", "queueing: true\nmaxConcurrency: 1\ndefaultRequestTTL: 50ms\n", true, http.StatusServiceUnavailable, DroppedNoEndpoints, "no endpoints"},
		{"queue full", "queueing: true\nmaxConcurrency: 1\nmaxQueued: 1\ndefaultRequestTTL: 5s\n", false, http.StatusTooManyRequests, DroppedSaturated, "queue is full"},
		{"queue full of an empty pool", "queueing: true\nmaxConcurrency: 1\nmaxQueued: 1\ndefaultRequestTTL: 5s\n", true, http.StatusServiceUnavailable, DroppedNoEndpoints, "no endpoints"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target, release := slowUpstream(t)
			defer close(release)
			g := flowGateway(t, tc.cfg, target, func(c *flowcontrol.Config) { c.PoolEmpty = func() bool { return tc.empty } })
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			held := func() {
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, g.url+"/v1/completions", strings.NewReader(`{"model":"m","prompt":"x"}`))
				if resp, err := http.DefaultClient.Do(req); err == nil {
					resp.Body.Close()
				}
			}
			go held() // takes the one slot
			time.Sleep(50 * time.Millisecond)
			if strings.Contains(tc.name, "full") {
				go held() // fills the queue
				deadline := time.Now().Add(5 * time.Second)
				for g.flowQueued() < 1 && time.Now().Before(deadline) {
					time.Sleep(5 * time.Millisecond)
				}
			}
			resp, body, _ := post(t, g.url, nil)
			if got := resp.header.Get(DroppedReasonHeader); got != tc.reason {
				t.Errorf("%s = %q, want %s", DroppedReasonHeader, got, tc.reason)
			}
			if resp.code != tc.code || !strings.Contains(body, tc.body) {
				t.Fatalf("%d %s, want %d with %q", resp.code, body, tc.code, tc.body)
			}
		})
	}
}

// With eviction on, a sheddable request holding the last slot is evicted
// when a critical one waits: it is answered 429 evicted (its pod's request
// canceled), and the critical request is served in its place.
func TestFlowControlEvictsTheSheddable(t *testing.T) {
	canceled := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if b, _ := io.ReadAll(r.Body); strings.Contains(string(b), "long") {
			<-r.Context().Done() // generating until the gateway gives up on it
			close(canceled)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"x","object":"text_completion","choices":[{"index":0,"text":"ok","finish_reason":"stop"}]}`)
	}))
	t.Cleanup(srv.Close)
	g := flowGateway(t, "queueing: true\nmaxConcurrency: 1\ndefaultRequestTTL: 10s\n", hostPort(srv.URL), func(c *flowcontrol.Config) {
		c.QueueSheddable, c.Eviction = true, &flowcontrol.Eviction{}
	})
	send := func(prompt, priority string) answer {
		req, _ := http.NewRequest(http.MethodPost, g.url+"/v1/completions", strings.NewReader(`{"model":"m","prompt":"`+prompt+`"}`))
		req.Header.Set(PriorityHeader, priority)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return answer{}
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return answer{code: resp.StatusCode, header: resp.Header}
	}
	evicted := make(chan answer, 1)
	go func() { evicted <- send("long", "-1") }()
	for deadline := time.Now().Add(5 * time.Second); g.flow.Evictable() != 1; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the sheddable request was never admitted")
		}
	}
	if a := send("short", "10"); a.code != http.StatusOK {
		t.Fatalf("the critical request got %d", a.code)
	}
	if a := <-evicted; a.code != http.StatusTooManyRequests || a.header.Get(DroppedReasonHeader) != flowcontrol.DroppedEvicted {
		t.Errorf("the evicted request got %d, %s %q", a.code, DroppedReasonHeader, a.header.Get(DroppedReasonHeader))
	}
	select {
	case <-canceled:
	case <-time.After(5 * time.Second):
		t.Error("the evicted request's call to its pod was not canceled")
	}
}
