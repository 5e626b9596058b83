package scrape

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	registryv1 "github.com/hermod/hermod/libs/api/hermod/registry/v1"
)

func TestScrapeFillsPodMetrics(t *testing.T) {
	p := newPod(t, vllmBody(3, 2, 0.25, 1000))
	h := newHarness(t, Config{})
	before := time.Now()
	h.s.SetEndpoints([]*registryv1.Endpoint{p.endpoint("pool-a", "pod-0")})

	got := h.rec.waitFor(t, "pod-0", "served models", func(m *eventsv1.PodMetrics) bool { return len(m.GetServedModels()) > 0 })
	want := &eventsv1.PodMetrics{
		Pool: "pool-a", Endpoint: "pod-0", Address: p.address(), Engine: "vllm",
		WaitingRequests: 2, RunningRequests: 3, KvCacheUsage: 0.25,
		BlockSize: 16, NumGpuBlocks: 4096,
		MaxLora: 2, RunningLoraAdapters: []string{"lora-a"}, WaitingLoraAdapters: []string{"lora-b", "lora-c"},
		PromptTokensTotal: 1000, GenerationTokensTotal: 200,
		PrefixCacheQueriesTotal: 1000, PrefixCacheHitsTotal: 640,
		PreemptionsTotal: 3, RequestSuccessTotal: 15,
		ServedModels: []string{"base", "lora-a"},
	}
	if got.GetTime() == nil || got.GetLastSuccess() == nil || !got.GetTime().AsTime().Equal(got.GetLastSuccess().AsTime()) {
		t.Errorf("time %v, last_success %v: want both, equal", got.GetTime(), got.GetLastSuccess())
	}
	if at := got.GetTime().AsTime(); at.Before(before) || at.After(time.Now()) {
		t.Errorf("time %v not within the test", at)
	}
	got.Time, got.LastSuccess = nil, nil
	if !equalPodMetrics(got, want) {
		t.Errorf("PodMetrics:\n got %v\nwant %v", got, want)
	}

	if v, _ := h.metric(t, "hermod_collector_endpoints"); v != 1 {
		t.Errorf("hermod_collector_endpoints = %v, want 1", v)
	}
	if v, _ := h.metric(t, "hermod_collector_scrape_duration_seconds", "kind", "metrics"); v < 1 {
		t.Errorf("no metrics scrape observed")
	}
	if v, _ := h.metric(t, "hermod_collector_scrape_duration_seconds", "kind", "models"); v < 1 {
		t.Errorf("no models poll observed")
	}
	if v, ok := h.metric(t, "hermod_collector_staleness_seconds", "pool", "pool-a", "endpoint", "pod-0"); !ok || v < 0 || v > 1 {
		t.Errorf("staleness %v, %v: want a fresh value", v, ok)
	}
}

func equalPodMetrics(a, b *eventsv1.PodMetrics) bool {
	return a.GetPool() == b.GetPool() && a.GetEndpoint() == b.GetEndpoint() && a.GetAddress() == b.GetAddress() &&
		a.GetEngine() == b.GetEngine() && a.GetWaitingRequests() == b.GetWaitingRequests() &&
		a.GetRunningRequests() == b.GetRunningRequests() && a.GetKvCacheUsage() == b.GetKvCacheUsage() &&
		a.GetBlockSize() == b.GetBlockSize() && a.GetNumGpuBlocks() == b.GetNumGpuBlocks() &&
		a.GetMaxLora() == b.GetMaxLora() && slices.Equal(a.GetRunningLoraAdapters(), b.GetRunningLoraAdapters()) &&
		slices.Equal(a.GetWaitingLoraAdapters(), b.GetWaitingLoraAdapters()) &&
		a.GetPromptTokensTotal() == b.GetPromptTokensTotal() && a.GetGenerationTokensTotal() == b.GetGenerationTokensTotal() &&
		a.GetPrefixCacheQueriesTotal() == b.GetPrefixCacheQueriesTotal() && a.GetPrefixCacheHitsTotal() == b.GetPrefixCacheHitsTotal() &&
		a.GetPreemptionsTotal() == b.GetPreemptionsTotal() && a.GetRequestSuccessTotal() == b.GetRequestSuccessTotal() &&
		slices.Equal(a.GetServedModels(), b.GetServedModels()) && a.GetError() == b.GetError() &&
		a.GetConsecutiveFailures() == b.GetConsecutiveFailures()
}

func TestScrapeFollowsChangingMetrics(t *testing.T) {
	p := newPod(t, vllmBody(1, 0, 0.1, 10))
	h := newHarness(t, Config{})
	h.s.SetEndpoints([]*registryv1.Endpoint{p.endpoint("pool", "pod")})
	h.rec.waitFor(t, "pod", "running 1", func(m *eventsv1.PodMetrics) bool { return m.GetRunningRequests() == 1 })
	for i, n := range []int{5, 9, 2} {
		p.setMetrics(vllmBody(n, i, 0.1*float64(n), float64(100*n)))
		got := h.rec.waitFor(t, "pod", "new values", func(m *eventsv1.PodMetrics) bool { return m.GetRunningRequests() == int64(n) })
		if got.GetWaitingRequests() != int64(i) || got.GetPromptTokensTotal() != float64(100*n) || got.GetError() != "" {
			t.Errorf("after change %d: %v", i, got)
		}
	}
	// Scrapes keep coming at the interval: 10ms, ±10%.
	n := h.rec.count("pod")
	time.Sleep(200 * time.Millisecond)
	if d := h.rec.count("pod") - n; d < 5 || d > 25 {
		t.Errorf("%d scrapes in 200ms at a 10ms interval", d)
	}
}

func TestSlowEndpointSkipsTicks(t *testing.T) {
	slow := newPod(t, vllmBody(1, 0, 0, 0))
	slow.delay.Store(int64(100 * time.Millisecond))
	fast := newPod(t, vllmBody(2, 0, 0, 0))
	h := newHarness(t, Config{Interval: 10 * time.Millisecond})
	h.s.SetEndpoints([]*registryv1.Endpoint{slow.endpoint("pool", "slow"), fast.endpoint("pool", "fast")})

	eventually(t, 5*time.Second, "slow endpoint scraped 4 times", func() bool { return h.rec.count("slow") >= 4 })
	if m := slow.maxInflight.Load(); m != 1 {
		t.Errorf("slow endpoint had %d scrapes in flight at once, want 1", m)
	}
	if skipped, _ := h.metric(t, "hermod_collector_scrape_skipped_total"); skipped < 20 {
		t.Errorf("skipped %v ticks in 4 scrapes of 100ms at a 10ms interval, want about 9 each", skipped)
	}
	// The slow endpoint does not hold up the fast one.
	if n := h.rec.count("fast"); n < 20 {
		t.Errorf("fast endpoint scraped %d times meanwhile", n)
	}
	for _, m := range h.rec.all("slow") {
		if m.GetError() != "" {
			t.Fatalf("slow but within the timeout: error %q", m.GetError())
		}
	}
}

func TestFailingEndpointKeepsLastValues(t *testing.T) {
	p := newPod(t, vllmBody(4, 1, 0.5, 123))
	h := newHarness(t, Config{})
	h.s.SetEndpoints([]*registryv1.Endpoint{p.endpoint("pool", "pod")})
	good := h.rec.waitFor(t, "pod", "a good scrape", func(m *eventsv1.PodMetrics) bool { return m.GetRunningRequests() == 4 })

	p.status.Store(http.StatusServiceUnavailable)
	failed := h.rec.waitFor(t, "pod", "3 failures", func(m *eventsv1.PodMetrics) bool { return m.GetConsecutiveFailures() >= 3 })
	if !strings.Contains(failed.GetError(), "status 503") {
		t.Errorf("error %q, want the status", failed.GetError())
	}
	if failed.GetRunningRequests() != 4 || failed.GetKvCacheUsage() != 0.5 || failed.GetPromptTokensTotal() != 123 || failed.GetEngine() != "vllm" {
		t.Errorf("failed scrape lost the last good values: %v", failed)
	}
	lastGood := h.rec.all("pod")
	var lastGoodTime time.Time
	for _, m := range lastGood {
		if m.GetError() == "" {
			lastGoodTime = m.GetTime().AsTime()
		}
	}
	if !failed.GetLastSuccess().AsTime().Equal(lastGoodTime) || !failed.GetTime().AsTime().After(lastGoodTime) {
		t.Errorf("last_success %v, time %v: want the last good scrape's time %v, and later", failed.GetLastSuccess().AsTime(), failed.GetTime().AsTime(), lastGoodTime)
	}
	if good.GetLastSuccess() == nil {
		t.Error("good scrape without last_success")
	}
	// Failures count up one by one.
	var seq []int32
	for _, m := range h.rec.all("pod") {
		if m.GetError() != "" {
			seq = append(seq, m.GetConsecutiveFailures())
		}
	}
	for i, n := range seq {
		if n != int32(i+1) {
			t.Fatalf("consecutive_failures %v, want 1, 2, 3, ...", seq)
		}
	}
	if v, _ := h.metric(t, "hermod_collector_scrape_errors_total", "kind", "metrics", "reason", "status"); v < 3 {
		t.Errorf("status errors %v, want at least 3", v)
	}
	// Staleness grows while failing.
	stale, _ := h.metric(t, "hermod_collector_staleness_seconds", "endpoint", "pod")
	time.Sleep(50 * time.Millisecond)
	if later, _ := h.metric(t, "hermod_collector_staleness_seconds", "endpoint", "pod"); later < stale+0.04 {
		t.Errorf("staleness %v then %v: not growing while failing", stale, later)
	}

	p.status.Store(0)
	p.setMetrics(vllmBody(7, 0, 0.5, 200))
	rec := h.rec.waitFor(t, "pod", "recovery", func(m *eventsv1.PodMetrics) bool { return m.GetError() == "" && m.GetRunningRequests() == 7 })
	if rec.GetConsecutiveFailures() != 0 || !rec.GetLastSuccess().AsTime().Equal(rec.GetTime().AsTime()) {
		t.Errorf("after recovery: %v", rec)
	}
	if n := h.logCount("scrape failed"); n != 1 {
		t.Errorf("%d 'scrape failed' log lines for one streak, want 1", n)
	}
	if n := h.logCount("scrape recovered"); n != 1 {
		t.Errorf("%d 'scrape recovered' log lines, want 1", n)
	}
}

func TestFailureBeforeFirstSuccess(t *testing.T) {
	p := newPod(t, "")
	p.status.Store(http.StatusInternalServerError)
	h := newHarness(t, Config{})
	h.s.SetEndpoints([]*registryv1.Endpoint{p.endpoint("pool", "pod")})
	got := h.rec.waitFor(t, "pod", "2 failures", func(m *eventsv1.PodMetrics) bool { return m.GetConsecutiveFailures() >= 2 })
	if got.GetLastSuccess() != nil || got.GetEngine() != "" || got.GetRunningRequests() != 0 || got.GetError() == "" || got.GetTime() == nil {
		t.Errorf("failing from the start: %v", got)
	}
	if got.GetAddress() != p.address() || got.GetPool() != "pool" {
		t.Errorf("identity missing: %v", got)
	}
}

func TestErrorReasons(t *testing.T) {
	closed := newPod(t, "")
	closedEndpoint := closed.endpoint("pool", "connect")
	closed.srv.Close()

	slow := newPod(t, vllmBody(1, 0, 0, 0))
	slow.delay.Store(int64(time.Second))
	notFound := newPod(t, "")
	notFound.status.Store(http.StatusNotFound)
	garbage := newPod(t, "<html><body>gateway</body></html>\n")
	huge := newPod(t, strings.Repeat("# padding\n", 200))

	h := newHarness(t, Config{Timeout: 50 * time.Millisecond, MaxBodyBytes: 1000})
	h.s.SetEndpoints([]*registryv1.Endpoint{
		closedEndpoint, slow.endpoint("pool", "timeout"), notFound.endpoint("pool", "status"),
		garbage.endpoint("pool", "parse"), huge.endpoint("pool", "huge"),
	})
	for endpoint, want := range map[string]string{
		"connect": "connection refused",
		"timeout": "deadline exceeded",
		"status":  "status 404 Not Found",
		"parse":   "parse exposition: line 1: invalid metric name",
		"huge":    "body larger than 1000 bytes",
	} {
		got := h.rec.waitFor(t, endpoint, "a failure", func(m *eventsv1.PodMetrics) bool { return m.GetError() != "" })
		if !strings.Contains(got.GetError(), want) {
			t.Errorf("%s: error %q, want %q", endpoint, got.GetError(), want)
		}
	}
	for reason, min := range map[string]float64{"connect": 1, "timeout": 1, "status": 1, "parse": 2} {
		if v, _ := h.metric(t, "hermod_collector_scrape_errors_total", "kind", "metrics", "reason", reason); v < min {
			t.Errorf("errors{reason=%s} = %v, want at least %v", reason, v, min)
		}
	}
}

func TestModelsPoll(t *testing.T) {
	p := newPod(t, vllmBody(1, 0, 0, 0))
	h := newHarness(t, Config{ModelsInterval: 100 * time.Millisecond, Timeout: 50 * time.Millisecond})
	start := time.Now()
	h.s.SetEndpoints([]*registryv1.Endpoint{p.endpoint("pool", "pod")})
	h.rec.waitFor(t, "pod", "served models", func(m *eventsv1.PodMetrics) bool {
		return slices.Equal(m.GetServedModels(), []string{"base", "lora-a"})
	})
	if d := time.Since(start); d > 80*time.Millisecond {
		t.Logf("first models poll after %v (at once expected; slow machine?)", d)
	}

	p.setModels(`{"object":"list","data":[{"id":"base"},{"id":"lora-a"},{"id":"lora-b"}]}`)
	h.rec.waitFor(t, "pod", "new adapter", func(m *eventsv1.PodMetrics) bool { return len(m.GetServedModels()) == 3 })

	// A failing poll keeps the last list.
	p.modelsStatus.Store(http.StatusBadGateway)
	polls := p.modelRequests.Load()
	eventually(t, 5*time.Second, "two more polls", func() bool { return p.modelRequests.Load() >= polls+2 })
	if got := h.rec.waitFor(t, "pod", "a scrape", func(*eventsv1.PodMetrics) bool { return true }); len(got.GetServedModels()) != 3 || got.GetError() != "" {
		t.Errorf("models poll failing: %v", got)
	}
	if v, _ := h.metric(t, "hermod_collector_scrape_errors_total", "kind", "models", "reason", "status"); v < 1 {
		t.Errorf("models status errors %v", v)
	}
	// Polled on its own interval, not at every scrape.
	if n, scrapes := p.modelRequests.Load(), p.requests.Load(); n*4 > scrapes {
		t.Errorf("%d models polls for %d scrapes", n, scrapes)
	}
}

func TestModelsPolledAtOnce(t *testing.T) {
	p := newPod(t, vllmBody(1, 0, 0, 0))
	h := newHarness(t, Config{ModelsInterval: time.Hour})
	h.s.SetEndpoints([]*registryv1.Endpoint{p.endpoint("pool", "pod")})
	h.rec.waitFor(t, "pod", "served models", func(m *eventsv1.PodMetrics) bool { return len(m.GetServedModels()) == 2 })
	if n := p.modelRequests.Load(); n != 1 {
		t.Errorf("%d polls", n)
	}
}

func TestSetEndpointsChurn(t *testing.T) {
	a := newPod(t, vllmBody(1, 0, 0, 0))
	b := newPod(t, "")
	b.status.Store(http.StatusInternalServerError) // counts its loop's failures
	c := newPod(t, vllmBody(3, 0, 0, 0))
	h := newHarness(t, Config{})

	h.s.SetEndpoints([]*registryv1.Endpoint{a.endpoint("pool", "a"), b.endpoint("pool", "b")})
	h.rec.waitFor(t, "a", "scraped", func(m *eventsv1.PodMetrics) bool { return m.GetRunningRequests() == 1 })
	h.rec.waitFor(t, "b", "5 failures", func(m *eventsv1.PodMetrics) bool { return m.GetConsecutiveFailures() >= 5 })
	if v, _ := h.metric(t, "hermod_collector_endpoints"); v != 2 {
		t.Errorf("endpoints gauge %v, want 2", v)
	}

	// a goes, c comes, b stays: its loop runs on (failures keep counting).
	bBefore := h.rec.all("b")
	h.s.SetEndpoints([]*registryv1.Endpoint{b.endpoint("pool", "b"), c.endpoint("pool", "c")})
	aCount, aRequests := h.rec.count("a"), a.requests.Load()
	h.rec.waitFor(t, "c", "scraped", func(m *eventsv1.PodMetrics) bool { return m.GetRunningRequests() == 3 })
	time.Sleep(50 * time.Millisecond)
	// A scrape of a in flight at its removal may still reach it (once); it
	// is not published, and no scrape follows.
	r1 := a.requests.Load()
	time.Sleep(100 * time.Millisecond)
	if n, r := h.rec.count("a"), a.requests.Load(); n != aCount || r != r1 || r1-aRequests > 1 {
		t.Errorf("removed endpoint still scraped: %d -> %d publishes, %d -> %d -> %d requests", aCount, n, aRequests, r1, r)
	}
	bAfter := h.rec.all("b")
	if len(bAfter) <= len(bBefore) {
		t.Fatal("b not scraped after SetEndpoints")
	}
	for i := 1; i < len(bAfter); i++ {
		if bAfter[i].GetConsecutiveFailures() != bAfter[i-1].GetConsecutiveFailures()+1 {
			t.Fatalf("b's loop restarted: consecutive_failures %d then %d", bAfter[i-1].GetConsecutiveFailures(), bAfter[i].GetConsecutiveFailures())
		}
	}
	if _, ok := h.metric(t, "hermod_collector_staleness_seconds", "endpoint", "a"); ok {
		t.Error("removed endpoint keeps its staleness series")
	}
	if _, ok := h.metric(t, "hermod_collector_staleness_seconds", "endpoint", "c"); !ok {
		t.Error("no staleness series for the new endpoint")
	}

	// b moves to a's server: its loop restarts there.
	moved := a.endpoint("pool", "b")
	h.s.SetEndpoints([]*registryv1.Endpoint{moved, c.endpoint("pool", "c")})
	got := h.rec.waitFor(t, "b", "scraped at the new address", func(m *eventsv1.PodMetrics) bool { return m.GetAddress() == a.address() })
	if got.GetError() != "" || got.GetConsecutiveFailures() != 0 || got.GetRunningRequests() != 1 {
		t.Errorf("moved endpoint: %v", got)
	}
	bRequests := b.requests.Load()
	time.Sleep(50 * time.Millisecond)
	if r := b.requests.Load(); r != bRequests {
		t.Errorf("old address still scraped: %d -> %d requests", bRequests, r)
	}

	// Invalid entries are left out; an empty set stops everything.
	h.s.SetEndpoints([]*registryv1.Endpoint{
		{Name: "no-port", Pool: "pool", Address: "127.0.0.1"},
		{Name: "", Pool: "pool", Address: "127.0.0.1", Port: 80},
		{Name: "x/y", Pool: "pool", Address: "127.0.0.1", Port: 80},
		nil,
		c.endpoint("pool", "c"),
	})
	if v, _ := h.metric(t, "hermod_collector_endpoints"); v != 1 {
		t.Errorf("endpoints gauge %v after invalid entries, want 1", v)
	}
	h.s.SetEndpoints(nil)
	if v, _ := h.metric(t, "hermod_collector_endpoints"); v != 0 {
		t.Errorf("endpoints gauge %v, want 0", v)
	}
}

func TestSamePodInTwoPools(t *testing.T) {
	p := newPod(t, vllmBody(2, 0, 0, 0))
	h := newHarness(t, Config{})
	h.s.SetEndpoints([]*registryv1.Endpoint{p.endpoint("pool-a", "pod"), p.endpoint("pool-b", "pod")})
	pools := map[string]bool{}
	eventually(t, 5*time.Second, "both pools published", func() bool {
		for _, m := range h.rec.all("pod") {
			pools[m.GetPool()] = true
		}
		return len(pools) == 2
	})
	for _, pool := range []string{"pool-a", "pool-b"} {
		if _, ok := h.metric(t, "hermod_collector_staleness_seconds", "pool", pool, "endpoint", "pod"); !ok {
			t.Errorf("no staleness of %s/pod", pool)
		}
	}
}

func TestJitterSpreadsFirstScrapes(t *testing.T) {
	const n = 8
	pods := make([]*pod, n)
	eps := make([]*registryv1.Endpoint, n)
	for i := range pods {
		pods[i] = newPod(t, vllmBody(i, 0, 0, 0))
		eps[i] = pods[i].endpoint("pool", string(rune('a'+i)))
	}
	h := newHarness(t, Config{Interval: 300 * time.Millisecond})
	start := time.Now()
	h.s.SetEndpoints(eps)
	eventually(t, 5*time.Second, "every pod scraped", func() bool {
		for _, p := range pods {
			if p.firstRequest().IsZero() {
				return false
			}
		}
		return true
	})
	var first, last time.Duration = time.Hour, 0
	for _, p := range pods {
		d := p.firstRequest().Sub(start)
		first, last = min(first, d), max(last, d)
	}
	// Uniform phases over 300ms: 8 of them all within 60ms has a
	// probability of 8 * 0.2^7 ≈ 1e-4.
	if last-first < 60*time.Millisecond {
		t.Errorf("first scrapes within %v of each other", last-first)
	}
	if last > 450*time.Millisecond {
		t.Errorf("a first scrape %v after start, beyond one interval", last)
	}
}

func TestCloseStopsLoops(t *testing.T) {
	p := newPod(t, vllmBody(1, 0, 0, 0))
	slow := newPod(t, vllmBody(1, 0, 0, 0))
	slow.delay.Store(int64(10 * time.Second))
	h := newHarness(t, Config{Timeout: 5 * time.Second, ModelsInterval: 10 * time.Second})
	h.s.SetEndpoints([]*registryv1.Endpoint{p.endpoint("pool", "pod"), slow.endpoint("pool", "slow")})
	h.rec.waitFor(t, "pod", "scraped", func(*eventsv1.PodMetrics) bool { return true })
	eventually(t, 5*time.Second, "slow scrape in flight", func() bool { return slow.inflight.Load() == 1 })

	start := time.Now()
	h.s.Close()
	if d := time.Since(start); d > time.Second {
		t.Errorf("Close took %v with a scrape in flight", d)
	}
	if n := h.rec.count("slow"); n != 0 {
		t.Errorf("the cancelled scrape was published (%d)", n)
	}
	// a request sent just before Close may reach the pod just after it
	time.Sleep(20 * time.Millisecond)
	published, requests := h.rec.count("pod"), p.requests.Load()
	time.Sleep(50 * time.Millisecond)
	if h.rec.count("pod") != published || p.requests.Load() != requests {
		t.Error("scraping after Close")
	}
	if _, ok := h.metric(t, "hermod_collector_endpoints"); ok {
		t.Error("metrics still registered after Close")
	}
	h.s.SetEndpoints([]*registryv1.Endpoint{p.endpoint("pool", "pod")})
	time.Sleep(30 * time.Millisecond)
	if p.requests.Load() != requests {
		t.Error("SetEndpoints after Close started a loop")
	}
	h.s.Close() // again: no-op
}
