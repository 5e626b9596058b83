package standard_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/libs/scheduling/schedulingtest"
)

var ctx = context.Background()

// A burst of concurrent requests must not see stale counts: with
// active-request-scorer alone, 100 simultaneous requests over 10 idle
// endpoints land exactly 10 on each, because each pick sees every earlier
// one (the in-flight update is in the pick's critical section).
func TestBurstSeesInFlightCounts(t *testing.T) {
	s := schedulingtest.Scheduler(t, "plugins: [{type: active-request-scorer}]")
	eps := schedulingtest.Endpoints(10)
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		counts = map[string]int{}
		start  = make(chan struct{})
	)
	for i := range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			res, err := s.Schedule(ctx, schedulingtest.Completion(fmt.Sprintf("burst-%d", i), "m", "hello"), eps)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			counts[res.Target().Endpoint.Name]++
			mu.Unlock()
			res.Release()
		}()
	}
	close(start)
	wg.Wait()
	for _, e := range eps {
		if counts[e.Name] != 10 {
			t.Errorf("%s got %d requests, want 10 (all: %v)", e.Name, counts[e.Name], counts)
		}
	}
}

// Load-aware routing under reference/000's config avoids the endpoint with
// the long queue and keeps a session on its endpoint.
func TestReference000Routing(t *testing.T) {
	data, err := os.ReadFile("testdata/reference/000-load-aware-values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s := schedulingtest.Scheduler(t, string(data))
	eps := schedulingtest.Waiting(40, 0, 3, 80)
	res, err := s.Schedule(ctx, schedulingtest.Completion("r1", "m", "short"), eps)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Target().Endpoint.Name; got != "pod-1" {
		t.Errorf("routed to %s, want pod-1 (empty queue)", got)
	}
	if len(res.Primary.Targets) != 2 {
		t.Errorf("maxNumOfEndpoints 2: %d targets", len(res.Primary.Targets))
	}
	resp := scheduling.NewResponse(res, http.StatusOK)
	s.ResponseReceived(ctx, nil, resp)
	token := resp.Headers["x-session-token"]
	res.Release()
	s.ResponseComplete(ctx, resp)

	// The same session sticks to pod-1 while its queue is moderate.
	eps[1].Metrics.WaitingRequests = 5
	req := schedulingtest.Completion("r2", "m", "short")
	req.Headers = map[string]string{"x-session-token": token}
	res, err = s.Schedule(ctx, req, eps)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Target().Endpoint.Name; got != "pod-1" {
		t.Errorf("session routed to %s, want pod-1", got)
	}
	res.Release()
}

// benchmarkFleet is n endpoints with varied load, reporting a vLLM cache
// config so prefix autoTune has data.
func benchmarkFleet(n int) []*scheduling.Endpoint {
	rng := rand.New(rand.NewPCG(uint64(n), 42))
	eps := schedulingtest.Endpoints(n)
	for _, e := range eps {
		*e.Metrics = scheduling.Metrics{
			WaitingRequests: rng.IntN(30),
			RunningRequests: rng.IntN(64),
			KVCacheUsage:    rng.Float64() * 0.95,
			BlockSize:       16,
			NumGPUBlocks:    20000,
			UpdatedAt:       time.Unix(1, 0),
		}
	}
	return eps
}

// benchmarkPrompts: 8 long system prompts x 8 user turns, ~1.3k characters
// (about 20 blocks of 16 tokens) each, so prefix matching has hits.
func benchmarkPrompts() []string {
	rng := rand.New(rand.NewPCG(7, 7))
	words := strings.Fields("quantum neural matrix optimization graph tensor latency throughput bandwidth kernel scheduler routing prefill decode scaling gradient cache expert")
	text := func(n int) string {
		var b strings.Builder
		for b.Len() < n {
			b.WriteString(words[rng.IntN(len(words))])
			b.WriteByte(' ')
		}
		return b.String()[:n]
	}
	var out []string
	for range 8 {
		system := text(1024)
		for range 8 {
			out = append(out, system+text(256))
		}
	}
	return out
}

const configDefault = "" // DefaultConfig

func schedulerFor(tb testing.TB, config string, clock func() time.Time) *scheduling.Scheduler {
	tb.Helper()
	cfg := scheduling.DefaultConfig()
	if config != configDefault {
		data, err := os.ReadFile(config)
		if err != nil {
			tb.Fatal(err)
		}
		if cfg, err = scheduling.ParseConfig(data); err != nil {
			tb.Fatal(err)
		}
	}
	s, err := scheduling.New(cfg, scheduling.WithRandSeed(3), scheduling.WithClock(clock),
		scheduling.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// cycleRunner drives a scheduler the way the picker does: each request is
// scheduled, its result released, and it completes 64 requests later (so
// about 64 are in flight).
type cycleRunner struct {
	s        *scheduling.Scheduler
	eps      []*scheduling.Endpoint
	requests []scheduling.Request
	ids      []string
	resp     scheduling.Response
	i        int
}

const inFlight = 64

func newCycleRunner(tb testing.TB, config string, endpoints int) *cycleRunner {
	var tick atomic.Int64
	base := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { return base.Add(time.Duration(tick.Add(1)) * time.Millisecond) }
	r := &cycleRunner{s: schedulerFor(tb, config, clock), eps: benchmarkFleet(endpoints)}
	for _, p := range benchmarkPrompts() {
		r.requests = append(r.requests, *schedulingtest.Completion("", "meta-llama/Llama-3.1-8B-Instruct", p))
	}
	for i := range 1 << 16 {
		r.ids = append(r.ids, fmt.Sprintf("req-%06d", i))
	}
	// warm up: every prompt routed a few times, so prefix and LRU state exist
	for range 4 * len(r.requests) {
		if err := r.step(); err != nil {
			tb.Fatal(err)
		}
	}
	return r
}

func (r *cycleRunner) step() error {
	req := &r.requests[r.i%len(r.requests)]
	req.ID = r.ids[r.i%len(r.ids)]
	res, err := r.s.Schedule(ctx, req, r.eps)
	if err != nil {
		return err
	}
	res.Release()
	if r.i >= inFlight {
		r.resp.RequestID = r.ids[(r.i-inFlight)%len(r.ids)]
		r.s.ResponseComplete(ctx, &r.resp)
	}
	r.i++
	return nil
}

var benchConfigs = []struct{ name, path string }{
	{"default", configDefault},
	{"reference000", "testdata/reference/000-load-aware-values.yaml"},
}

// BenchmarkScheduleCycle measures one scheduling cycle (plus the completion
// of an earlier request) for 10, 100 and 1000 endpoints under the default
// config (queue 2, kv 2, prefix 3, max-score) and reference/000's (five
// load-aware scorers, max-score-picker with 2 endpoints).
func BenchmarkScheduleCycle(b *testing.B) {
	for _, c := range benchConfigs {
		for _, n := range []int{10, 100, 1000} {
			b.Run(fmt.Sprintf("config=%s/endpoints=%d", c.name, n), func(b *testing.B) {
				r := newCycleRunner(b, c.path, n)
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					if err := r.step(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// Allocations per cycle do not grow with the number of endpoints (buffers
// are reused), for both benchmark configs.
func TestCycleAllocationsDoNotGrowWithEndpoints(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items: allocation counts are meaningless")
	}
	for _, c := range benchConfigs {
		var per []float64
		for _, n := range []int{10, 100, 1000} {
			r := newCycleRunner(t, c.path, n)
			// reach steady state: every endpoint seen by the prefix index
			for range 5000 {
				if err := r.step(); err != nil {
					t.Fatal(err)
				}
			}
			allocs := testing.AllocsPerRun(500, func() {
				if err := r.step(); err != nil {
					t.Fatal(err)
				}
			})
			per = append(per, allocs)
		}
		t.Logf("%s: allocs/cycle at 10, 100, 1000 endpoints: %v", c.name, per)
		if per[2] > per[0]+1 || per[1] > per[0]+1 {
			t.Errorf("%s: allocations grow with endpoints: %v", c.name, per)
		}
		if per[2] > 16 {
			t.Errorf("%s: %v allocations per cycle; expected a small constant", c.name, per[2])
		}
	}
}

// FuzzBuildConfig: whatever ParseConfig accepts either fails to build with
// an error or builds a scheduler that describes itself and schedules.
func FuzzBuildConfig(f *testing.F) {
	for _, p := range []string{
		"testdata/reference/000-load-aware-values.yaml",
		"testdata/reference/001-disagg-canonical.yaml",
		"testdata/reference/003-pd-context-length.yaml",
		"testdata/reference/003-deployment-values.yaml",
		"testdata/reference/001-tokenizer.yaml",
		"testdata/reference/001-data-layer.yaml",
	} {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte("plugins: [{type: by-label-selector, parameters: {matchExpressions: [{key: a, operator: In, values: [b]}]}}, {type: weighted-random-picker, parameters: {maxNumOfEndpoints: 3}}]"))
	f.Add([]byte("plugins: [{type: context-length-aware, parameters: {enableFiltering: true}}, {type: lora-affinity-scorer}, {type: random-picker}]"))
	eps := benchmarkFleet(6)
	eps[0].Labels = map[string]string{"mif.moreh.io/role": "prefill", "mif.moreh.io/context-length-range": "0-100"}
	eps[1].Labels = map[string]string{"mif.moreh.io/role": "decode", "a": "b"}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := scheduling.ParseConfig(data)
		if err != nil {
			return
		}
		s, err := scheduling.New(cfg, scheduling.WithLogger(quiet), scheduling.WithRandSeed(1))
		if err != nil {
			return
		}
		defer func() { _ = s.Close() }()
		if d := s.Describe(); d == nil || len(d.SchedulingProfiles) == 0 {
			t.Fatal("built scheduler without profiles")
		}
		res, err := s.Schedule(ctx, schedulingtest.Completion("f", "m", strings.Repeat("fuzz ", 40)), eps)
		if err != nil {
			if scheduling.HTTPStatus(err) == http.StatusInternalServerError {
				t.Fatalf("internal error: %v", err)
			}
			return
		}
		if res.Target().Endpoint == nil {
			t.Fatal("success without a target")
		}
		s.ResponseComplete(ctx, scheduling.NewResponse(res, http.StatusOK))
		res.Release()
	})
}
