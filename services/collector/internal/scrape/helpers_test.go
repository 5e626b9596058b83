package scrape

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hermod/hermod/testkit/childproc"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/goleak"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	registryv1 "github.com/hermod/hermod/libs/api/hermod/registry/v1"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// pod is a model server on a real HTTP port whose answers a test controls.
type pod struct {
	srv *httptest.Server
	mux *http.ServeMux // more paths may be added

	metrics atomic.Pointer[string]
	models  atomic.Pointer[string]
	// status, when set, answers /metrics with it; modelsStatus likewise.
	status       atomic.Int32
	modelsStatus atomic.Int32
	delay        atomic.Int64 // of /metrics, in nanoseconds

	requests      atomic.Int64
	modelRequests atomic.Int64
	inflight      atomic.Int64
	maxInflight   atomic.Int64

	mu    sync.Mutex
	first time.Time // of the first /metrics request
}

func newPod(t testing.TB, body string) *pod {
	t.Helper()
	p := &pod{}
	p.setMetrics(body)
	p.setModels(`{"object":"list","data":[{"id":"base","root":"base","parent":null},{"id":"lora-a","parent":"base"}]}`)
	p.mux = http.NewServeMux()
	p.mux.HandleFunc("GET /metrics", p.serveMetrics)
	p.mux.HandleFunc("GET /v1/models", p.serveModels)
	p.srv = httptest.NewServer(p.mux)
	t.Cleanup(p.srv.Close)
	return p
}

func (p *pod) setMetrics(body string) { p.metrics.Store(&body) }
func (p *pod) setModels(body string)  { p.models.Store(&body) }

func (p *pod) serveMetrics(w http.ResponseWriter, r *http.Request) {
	n := p.inflight.Add(1)
	defer p.inflight.Add(-1)
	for m := p.maxInflight.Load(); n > m && !p.maxInflight.CompareAndSwap(m, n); m = p.maxInflight.Load() {
	}
	p.requests.Add(1)
	p.mu.Lock()
	if p.first.IsZero() {
		p.first = time.Now()
	}
	p.mu.Unlock()
	if d := time.Duration(p.delay.Load()); d > 0 {
		select {
		case <-time.After(d):
		case <-r.Context().Done():
			return
		}
	}
	if code := p.status.Load(); code != 0 {
		http.Error(w, "failing", int(code))
		return
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8; escaping=underscores")
	_, _ = w.Write([]byte(*p.metrics.Load()))
}

func (p *pod) serveModels(w http.ResponseWriter, _ *http.Request) {
	p.modelRequests.Add(1)
	if code := p.modelsStatus.Load(); code != 0 {
		http.Error(w, "failing", int(code))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(*p.models.Load()))
}

func (p *pod) firstRequest() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.first
}

// endpoint returns the registry entry of the pod.
func (p *pod) endpoint(pool, name string) *registryv1.Endpoint {
	addr := p.srv.Listener.Addr().(*net.TCPAddr)
	return &registryv1.Endpoint{Name: name, Pool: pool, Address: addr.IP.String(), Port: int32(addr.Port)}
}

func (p *pod) address() string { return p.srv.Listener.Addr().String() }

// vllmBody is a vLLM exposition with the given state.
func vllmBody(running, waiting int, usage, promptTokens float64) string {
	return fmt.Sprintf(`# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="base"} %d
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="base"} %d
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="base"} %g
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="16",engine="0",num_gpu_blocks="4096"} 1
# TYPE vllm:lora_requests_info gauge
vllm:lora_requests_info{max_lora="2",running_lora_adapters="lora-a",waiting_lora_adapters="lora-b,lora-c"} 1.7e+09
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{engine="0",model_name="base"} %g
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="base"} 200
# TYPE vllm:prefix_cache_queries_total counter
vllm:prefix_cache_queries_total{engine="0",model_name="base"} 1000
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{engine="0",model_name="base"} 640
# TYPE vllm:num_preemptions_total counter
vllm:num_preemptions_total{engine="0",model_name="base"} 3
# TYPE vllm:request_success_total counter
vllm:request_success_total{engine="0",finished_reason="stop",model_name="base"} 10
vllm:request_success_total{engine="0",finished_reason="length",model_name="base"} 5
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.1",model_name="base"} 4
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="base"} 15
vllm:time_to_first_token_seconds_sum{engine="0",model_name="base"} 2.5
vllm:time_to_first_token_seconds_count{engine="0",model_name="base"} 15
`, running, waiting, usage, promptTokens)
}

// recorder is a Sink that keeps every PodMetrics by endpoint.
type recorder struct {
	mu   sync.Mutex
	msgs map[string][]*eventsv1.PodMetrics
}

func newRecorder() *recorder { return &recorder{msgs: map[string][]*eventsv1.PodMetrics{}} }

func (r *recorder) Publish(m *eventsv1.PodMetrics) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs[m.GetEndpoint()] = append(r.msgs[m.GetEndpoint()], m)
}

func (r *recorder) all(endpoint string) []*eventsv1.PodMetrics {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*eventsv1.PodMetrics(nil), r.msgs[endpoint]...)
}

func (r *recorder) count(endpoint string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.msgs[endpoint])
}

// waitFor waits until the latest PodMetrics of endpoint satisfies cond and
// returns it.
func (r *recorder) waitFor(t *testing.T, endpoint, what string, cond func(*eventsv1.PodMetrics) bool) *eventsv1.PodMetrics {
	t.Helper()
	var got *eventsv1.PodMetrics
	deadline := time.Now().Add(5 * time.Second)
	for {
		if all := r.all(endpoint); len(all) > 0 {
			got = all[len(all)-1]
			if cond(got) {
				return got
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s: the latest of %d messages: %v", endpoint, what, r.count(endpoint), got)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// eventually polls cond every 5ms until it holds or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// harness is a Scraper under test with its sink, registry and log.
type harness struct {
	s   *Scraper
	rec *recorder
	reg *prometheus.Registry
	log *childproc.Output
}

// newHarness starts a Scraper with cfg (fast defaults for the zero fields)
// and closes it when the test ends.
func newHarness(t *testing.T, cfg Config) *harness {
	t.Helper()
	h := &harness{rec: newRecorder(), reg: prometheus.NewRegistry(), log: &childproc.Output{}}
	cfg.Sink, cfg.Registerer = h.rec, h.reg
	cfg.Logger = slog.New(slog.NewTextHandler(h.log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if cfg.Interval == 0 {
		cfg.Interval = 10 * time.Millisecond
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 500 * time.Millisecond
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.s = s
	t.Cleanup(func() {
		s.Close()
		if t.Failed() {
			t.Logf("scraper log:\n%s", h.log.String())
		}
	})
	return h
}

// metric returns the value of a counter or gauge of the registry (a
// histogram's sample count) whose labels include labels.
func (h *harness) metric(t *testing.T, name string, labels ...string) (float64, bool) {
	t.Helper()
	families, err := h.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if hasLabels(m, labels) {
				switch {
				case m.Counter != nil:
					return m.GetCounter().GetValue(), true
				case m.Gauge != nil:
					return m.GetGauge().GetValue(), true
				case m.Histogram != nil:
					return float64(m.GetHistogram().GetSampleCount()), true
				}
			}
		}
	}
	return 0, false
}

func hasLabels(m *dto.Metric, pairs []string) bool {
	for i := 0; i+1 < len(pairs); i += 2 {
		found := false
		for _, l := range m.GetLabel() {
			if l.GetName() == pairs[i] && l.GetValue() == pairs[i+1] {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// logCount returns how many log lines have msg.
func (h *harness) logCount(msg string) int {
	return strings.Count(h.log.String(), fmt.Sprintf("msg=%q", msg))
}
