package proxy

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hermod/hermod/libs/giemetrics"
	"github.com/hermod/hermod/services/gateway/internal/flowcontrol"
)

// Thousands of requests with random fairness ids, priorities, models and
// reused request ids: the metric series, the priority bands and the
// gateway's heap stay bounded, every request gets an id of its own (so a
// reused client id cannot share a lease), and nothing is left in flight.
func TestRandomClientChoicesStayBounded(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"choices":[{"text":"ok"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
	}))
	defer up.Close()
	reg := prometheus.NewRegistry()
	st, err := flowcontrol.Parse([]byte("queueing: true\nmaxConcurrency: 8\n"))
	if err != nil {
		t.Fatal(err)
	}
	st.Config.Metrics = flowcontrol.NewMetrics(reg, "pool", nil)
	ctrl := flowcontrol.New(st.Config, flowcontrol.NewSlots(st.MaxConcurrency, nil))
	g := newGatewayWith(t, func(o *Options) {
		o.Flow = &Flow{Controller: ctrl, Settings: st}
		o.Metrics = NewMetrics(reg)
	}, hostPort(up.URL))
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)

	const n, workers = 3000, 16
	reused := []string{"same-id-1", "same-id-2", "same-id-3"}
	var wg sync.WaitGroup
	var served atomic.Int64
	jobs := make(chan int)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				rng := rand.New(rand.NewPCG(uint64(i), 7))
				model := fmt.Sprintf("model-%x-%s", rng.Uint64(), strings.Repeat("x", rng.IntN(200)))
				req, _ := http.NewRequest(http.MethodPost, g.url+"/v1/completions", strings.NewReader(fmt.Sprintf(`{"model":%q,"prompt":"x"}`, model)))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set(flowcontrol.FairnessHeader, fmt.Sprintf("tenant-%x", rng.Uint64()))
				priority := rng.IntN(1_000_000) - 500_000
				req.Header.Set(PriorityHeader, fmt.Sprint(priority))
				req.Header.Set(RequestIDHeader, reused[i%len(reused)])
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				switch {
				case resp.StatusCode == http.StatusOK:
					served.Add(1)
				case resp.StatusCode == http.StatusTooManyRequests && priority < 0: // sheddable, shed while saturated
				default:
					t.Errorf("request %d (priority %d): %d", i, priority, resp.StatusCode)
				}
			}
		}()
	}
	for i := range n {
		jobs <- i
	}
	close(jobs)
	wg.Wait()

	// every label a client chooses keeps at most MaxLabelValues values
	// and "other", in every family
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		values := map[string]map[string]bool{}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if values[l.GetName()] == nil {
					values[l.GetName()] = map[string]bool{}
				}
				values[l.GetName()][l.GetValue()] = true
			}
		}
		for label, vs := range values {
			if len(vs) > giemetrics.MaxLabelValues+1 {
				t.Errorf("%s{%s}: %d values from %d requests", f.GetName(), label, len(vs), n)
			}
		}
	}
	if b, q := ctrl.Bands(), ctrl.Queued(); b != 0 || q != 0 {
		t.Errorf("%d bands and %d queued once every request was served", b, q)
	}
	// the picker saw a new id for every request, never a client's
	ids := map[string]bool{}
	g.picker.mu.Lock()
	for _, r := range g.picker.reqs {
		if ids[r.GetRequestId()] || strings.HasPrefix(r.GetRequestId(), "same-id") {
			t.Fatalf("request id %q reached the picker twice or from the client", r.GetRequestId())
		}
		ids[r.GetRequestId()] = true
	}
	g.picker.mu.Unlock()
	if int64(len(ids)) != served.Load() {
		t.Errorf("%d distinct request ids for %d requests served", len(ids), served.Load())
	}
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	if grew := int64(after.HeapInuse) - int64(before.HeapInuse); grew > 64<<20 {
		t.Errorf("the heap grew by %d MB over %d requests", grew>>20, n)
	}
	t.Logf("%d of %d served (the rest sheddable, shed); heap in use %d -> %d MB; %d families", served.Load(), n, before.HeapInuse>>20, after.HeapInuse>>20, len(families))
}
