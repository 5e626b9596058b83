package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hermod/hermod/tools/loadgen/workload"
)

// fakeAPI is an OpenAI completions endpoint (the unit under test is the
// client): it records the order requests arrive in, answers after delay,
// fails the ids in fail with 503, streams when asked, and serves /metrics
// for queue sampling.
type fakeAPI struct {
	mu      sync.Mutex
	order   []string
	bodies  []map[string]any
	delay   time.Duration
	fail    map[string]bool
	waiting int
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/metrics" {
		f.mu.Lock()
		n := f.waiting
		f.waiting++
		f.mu.Unlock()
		fmt.Fprintf(w, "# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{engine=\"0\",model_name=\"m\"} %d\nvllm:num_requests_running{engine=\"0\",model_name=\"m\"} 3\n", n)
		return
	}
	var body map[string]any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	prompt := body["prompt"].(string)
	id := strings.TrimPrefix(strings.Fields(prompt)[0], "[")
	id = strings.TrimSuffix(id, "]")
	f.mu.Lock()
	f.order = append(f.order, id)
	f.bodies = append(f.bodies, body)
	fail := f.fail[id]
	f.mu.Unlock()
	if fail {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, `{"error":{"message":"no capacity","type":"ServiceUnavailable","code":503}}`)
		return
	}
	w.Header().Set("X-Decoder-Host-Port", "10.0.0.7:8000")
	w.Header().Set("X-Request-Id", "req-"+id)
	if body["stream"] == true {
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		time.Sleep(f.delay / 2)
		fmt.Fprint(w, "data: {\"choices\":[{\"text\":\"hel\"}]}\n\n")
		fl.Flush()
		time.Sleep(f.delay / 2)
		fmt.Fprint(w, "data: {\"choices\":[{\"text\":\"lo\"}]}\n\ndata: {\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":2}}\n\ndata: [DONE]\n\n")
		return
	}
	time.Sleep(f.delay)
	fmt.Fprint(w, `{"choices":[{"text":" hello "}],"usage":{"prompt_tokens":9,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":4}}}`)
}

func testWorkload() *workload.Workload {
	at := []time.Duration{0, 0, 0, time.Second, 2 * time.Second, 2 * time.Second}
	w := &workload.Workload{Name: "test"}
	for i, a := range at {
		id := fmt.Sprintf("R%d", i)
		w.Requests = append(w.Requests, workload.Request{ID: id, Kind: "SHORT", At: a, MaxTokens: 2, Prompt: "[" + id + "] words"})
	}
	// generation order is not launch order
	w.Requests[3], w.Requests[4] = w.Requests[4], w.Requests[3]
	return w
}

func TestRunSendsOnScheduleInOrderAndScalesTimes(t *testing.T) {
	api := &fakeAPI{delay: 40 * time.Millisecond, fail: map[string]bool{"R5": true}}
	srv := httptest.NewServer(api)
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	const speed = 10
	res, err := Run(context.Background(), testWorkload(), Options{
		BaseURL: srv.URL, Model: "m", Speed: speed, SendGap: 10 * time.Millisecond, KeepText: true,
		Pods: []Pod{{Name: "pod-a", Address: host}, {Name: "pod-b", Address: "10.0.0.7:8000"}}, SampleInterval: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	// every request arrived once
	got := slices.Clone(api.order)
	slices.Sort(got)
	if strings.Join(got, ",") != "R0,R1,R2,R3,R4,R5" {
		t.Fatalf("arrivals %v", api.order)
	}
	for _, b := range api.bodies {
		if b["model"] != "m" || b["max_tokens"] != float64(2) || b["temperature"] != float64(0) || b["top_p"] != float64(1) || b["stream"] != false {
			t.Fatalf("request body %v", b)
		}
	}
	byID := map[string]Result{}
	for _, r := range res.Requests {
		byID[r.ID] = r
	}
	// sent in launch order, the three due at 0 in workload order and each
	// about the send gap (10 ms simulated) after the one before (the
	// server may still see them in another order: its handlers race)
	launch := []string{"R0", "R1", "R2", "R3", "R4", "R5"}
	for i := 1; i < len(launch); i++ {
		if a, b := byID[launch[i-1]].Sent, byID[launch[i]].Sent; b < a+0.005 {
			t.Fatalf("%s sent at %.4fs, %s at %.4fs: not in launch order a send gap apart", launch[i-1], a, launch[i], b)
		}
	}
	for _, r := range res.Requests {
		// never early; latency in simulated seconds (the server's 40 ms
		// is 0.4 s simulated)
		if r.Sent < r.Scheduled-1e-9 {
			t.Errorf("%s sent at %.3fs, scheduled %.3fs", r.ID, r.Sent, r.Scheduled)
		}
		if r.ID != "R5" && (r.Latency < 0.4 || r.Status != 200 || r.Pod != "pod-b" || r.RequestID != "req-"+r.ID || r.PromptTokens != 9 || r.CompletionTokens != 2 || r.CachedTokens != 4 || r.Text != "hello") {
			t.Errorf("result %+v", r)
		}
	}
	if f := byID["R5"]; f.Status != 503 || !strings.Contains(f.Error, "no capacity") || f.OK() {
		t.Fatalf("failed request recorded as %+v", f)
	}
	s := res.Summary
	if s.Count != 5 || s.Failed != 1 || s.PerPod["pod-b"] != 5 || s.TotalE2E < 2.4 || s.HitRate != 4.0/9 || s.Throughput != 5/s.TotalE2E {
		t.Fatalf("summary %+v", s)
	}
	if len(res.Queues) != 2 || len(res.Queues[0].Samples) < 2 || res.Queues[0].Samples[0].Running != 3 || res.Queues[1].Errors == 0 {
		t.Fatalf("queues %+v", res.Queues)
	}
	var out strings.Builder
	res.PrintSummary(&out)
	if !strings.Contains(out.String(), "count=5 avg=") || !strings.Contains(out.String(), "All requests completed in") {
		t.Fatalf("summary printed as %q", out.String())
	}
}

func TestRunStreamsAndRecordsTTFT(t *testing.T) {
	api := &fakeAPI{delay: 40 * time.Millisecond}
	srv := httptest.NewServer(api)
	defer srv.Close()
	w := testWorkload()
	w.Requests = w.Requests[:2]
	res, err := Run(context.Background(), w, Options{BaseURL: srv.URL, Model: "m", Stream: true, Speed: 5, KeepText: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range api.bodies {
		if b["stream"] != true || b["stream_options"] == nil {
			t.Fatalf("streaming body %v", b)
		}
	}
	for _, r := range res.Requests {
		if !r.OK() || r.TTFT == nil || *r.TTFT < 0.1 || *r.TTFT > r.Latency || r.Text != "hello" || r.CompletionTokens != 2 {
			t.Fatalf("streamed result %+v", r)
		}
	}
	if res.Summary.TTFTP50 <= 0 {
		t.Fatalf("summary %+v", res.Summary)
	}
}

func TestRunRecordsTransportErrorsAndInterruption(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close() // nothing listens there now
	w := testWorkload()
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	res, err := Run(ctx, w, Options{BaseURL: "http://" + addr, Model: "m", Speed: 1})
	if err == nil {
		t.Fatal("an interrupted run reported no error")
	}
	if res == nil || res.Summary.Failed != len(w.Requests) {
		t.Fatalf("results %+v", res)
	}
	for _, r := range res.Requests {
		if r.Error == "" || r.Status != 0 {
			t.Fatalf("result %+v", r)
		}
	}
}

func TestSummarizeUsesTheReferenceFormulas(t *testing.T) {
	var reqs []Result
	for i := 1; i <= 40; i++ {
		reqs = append(reqs, Result{ID: fmt.Sprint(i), Status: 200, Latency: float64(i)})
	}
	reqs = append(reqs, Result{ID: "x", Status: 500, Latency: 1000})
	s := Summarize(reqs, 99)
	// median of 1..40 = 20.5; p95 = sorted[int(40*0.95)-1] = sorted[37] = 38;
	// p99 = sorted[int(39.6)-1] = sorted[38] = 39
	if s.Count != 40 || s.Failed != 1 || s.P50 != 20.5 || s.P95 != 38 || s.P99 != 39 || s.Avg != 20.5 || s.Max != 40 || s.TotalE2E != 99 {
		t.Fatalf("summary %+v", s)
	}
	if s := Summarize(nil, 1); s.Count != 0 || s.P50 != 0 {
		t.Fatalf("empty summary %+v", s)
	}
}

func TestParseQueues(t *testing.T) {
	text := `# HELP vllm:num_requests_waiting Number of requests waiting.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="a"} 4
vllm:num_requests_waiting{engine="1",model_name="a"} 2
vllm:num_requests_waiting_total 99
vllm:num_requests_running 7 1700000000000
`
	w, r, err := parseQueues(strings.NewReader(text))
	if err != nil || w != 6 || r != 7 {
		t.Fatalf("parseQueues = %v, %v, %v", w, r, err)
	}
	if _, _, err := parseQueues(strings.NewReader("other 1\n")); err == nil {
		t.Fatal("no queue metrics accepted")
	}
	if _, _, err := parseQueues(strings.NewReader("vllm:num_requests_waiting x\n")); err == nil {
		t.Fatal("bad value accepted")
	}
	_, _, _ = parseQueues(io.LimitReader(strings.NewReader(text), 10))
}

func TestParseResultsFileRoundTrip(t *testing.T) {
	res := &Results{Workload: "w", Speed: 3, Requests: []Result{{ID: "a", Status: 200, Latency: 1}}}
	res.Summary = Summarize(res.Requests, 2)
	path := t.TempDir() + "/r.json"
	if err := res.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	back, err := ReadFile(path)
	if err != nil || back.Summary.Count != 1 || back.Requests[0].ID != "a" || back.Speed != 3 {
		t.Fatalf("read back %+v, %v", back, err)
	}
}
