package observe

import (
	"math"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	registryv1 "github.com/hermod/hermod/libs/api/hermod/registry/v1"
	"github.com/hermod/hermod/services/autoscaler/internal/scaling"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }
func near(a, b float64) bool             { return math.Abs(a-b) < 1e-9 }
func ep(name, variant string) *registryv1.Endpoint {
	return &registryv1.Endpoint{Name: name, Model: "m", Labels: map[string]string{VariantLabel: variant}}
}

func model(variants ...string) *scaling.Model {
	m := &scaling.Model{ID: "m"}
	for _, v := range variants {
		m.Variants = append(m.Variants, &scaling.Variant{Name: v, ModelID: "m"})
	}
	return m
}

func TestMaxOverTheLastMinuteAndSinceTheFleetSettled(t *testing.T) {
	c := &clock{time.Unix(1000, 0)}
	tr := New(c.now)
	tr.SetEndpoints([]*registryv1.Endpoint{ep("p0", "a")})
	for _, q := range []int64{2, 9, 3} { // 9 at t+1s
		tr.ObserveMetrics(&eventsv1.PodMetrics{Endpoint: "p0", WaitingRequests: q, KvCacheUsage: float64(q) / 10, NumGpuBlocks: 100, BlockSize: 16})
		c.advance(time.Second)
	}
	m := model("a")
	tr.Fill(m, time.Hour, time.Time{})
	r := m.Variants[0].Replicas[0]
	if m.Variants[0].Ready != 1 || r.Queue != 9 || !near(r.KVUsage, 0.9) {
		t.Fatalf("max over the minute: ready %d queue %v kv %v, want 1, 9, 0.9", m.Variants[0].Ready, r.Queue, r.KVUsage)
	}
	if r.KVCapacityTokens != 1600 || !near(r.TokensInUse, 0.3*1600) {
		t.Fatalf("capacity %v in use %v, want 1600 and 480 (latest usage)", r.KVCapacityTokens, r.TokensInUse)
	}
	// since the fleet settled after the 9: only the 3 counts
	tr.Fill(m, time.Hour, time.Unix(1002, 0))
	if q := m.Variants[0].Replicas[0].Queue; q != 3 {
		t.Fatalf("queue since the fleet settled = %v, want 3", q)
	}
	// a minute on, the 9 has left the window; the latest sample stays
	c.advance(59 * time.Second)
	tr.ObserveMetrics(&eventsv1.PodMetrics{Endpoint: "p0", WaitingRequests: 1})
	tr.Fill(m, time.Hour, time.Time{})
	if q := m.Variants[0].Replicas[0].Queue; q != 3 {
		t.Fatalf("queue after a minute = %v, want 3 (the 9 is 61 s old)", q)
	}
	c.advance(2 * time.Minute)
	tr.Fill(m, time.Hour, time.Time{})
	if m.Variants[0].Ready != 0 {
		t.Fatal("a replica with stale metrics counts as ready")
	}
}

func TestTokenAveragesFromCountersAndResets(t *testing.T) {
	c := &clock{time.Unix(1000, 0)}
	tr := New(c.now)
	tr.SetEndpoints([]*registryv1.Endpoint{ep("p0", "a")})
	obs := func(prompt, gen, ok, q, hits float64) {
		tr.ObserveMetrics(&eventsv1.PodMetrics{Endpoint: "p0", PromptTokensTotal: prompt, GenerationTokensTotal: gen,
			RequestSuccessTotal: ok, PrefixCacheQueriesTotal: q, PrefixCacheHitsTotal: hits})
		c.advance(2 * time.Second)
	}
	obs(1000, 100, 10, 1000, 0)
	obs(3000, 500, 20, 3000, 500) // +2000 prompt, +400 gen, +10 ok: 200 in, 40 out; hits 500/2000
	m := model("a")
	tr.Fill(m, time.Hour, time.Time{})
	r := m.Variants[0].Replicas[0]
	if !near(r.AvgInputTokens, 200) || !near(r.AvgOutputTokens, 40) || !near(r.PrefixHitRate, 0.25) {
		t.Fatalf("averages in %v out %v hit %v, want 200, 40, 0.25", r.AvgInputTokens, r.AvgOutputTokens, r.PrefixHitRate)
	}
	obs(10, 1, 1, 10, 0) // the engine restarted: the window starts over
	obs(110, 21, 2, 10, 0)
	tr.Fill(m, time.Hour, time.Time{})
	if r := m.Variants[0].Replicas[0]; !near(r.AvgInputTokens, 100) || !near(r.AvgOutputTokens, 20) {
		t.Fatalf("after a reset in %v out %v, want 100 and 20", r.AvgInputTokens, r.AvgOutputTokens)
	}
}

func TestCompletionsGiveLatenciesArrivalRateAndActivity(t *testing.T) {
	c := &clock{time.Unix(1000, 0)}
	tr := New(c.now)
	tr.SetEndpoints([]*registryv1.Endpoint{ep("p0", "a"), ep("p1", "b")})
	tr.ObserveMetrics(&eventsv1.PodMetrics{Endpoint: "p0"})
	for i := range 10 {
		tr.ObserveCompletion(&eventsv1.RequestCompleted{Model: "m", EndpointName: "p0", StatusCode: 200,
			Ttft: durationpb.New(time.Duration(100+10*i) * time.Millisecond), Tpot: durationpb.New(20 * time.Millisecond)})
		c.advance(time.Second)
	}
	m := model("a", "b")
	tr.Fill(m, 5*time.Second, time.Time{})
	r := m.Variants[0].Replicas[0]
	// TTFT 100..190 ms: mean 145; 10 requests over the 10 s since the first
	if !near(r.AvgTTFT, 145) || !near(r.AvgITL, 20) || !near(r.ArrivalRate, 1) {
		t.Fatalf("ttft %v itl %v rate %v, want 145, 20, 1", r.AvgTTFT, r.AvgITL, r.ArrivalRate)
	}
	if m.SuccessInRetention == 0 || !m.RetentionObserved {
		t.Fatalf("active model: success %v observed %v", m.SuccessInRetention, m.RetentionObserved)
	}
	if m.Variants[1].Ready != 0 {
		t.Fatal("p1 has no metrics: not ready")
	}
	c.advance(6 * time.Second)
	tr.Fill(m, 5*time.Second, time.Time{})
	if m.SuccessInRetention != 0 {
		t.Fatal("no success in the retention period: still active")
	}
	// a new leader restores the activity an earlier one saw
	tr2 := New(c.now)
	tr2.Restore(c.t.Add(-time.Hour), map[string]time.Time{"m": c.t.Add(-time.Second)})
	m2 := model("a")
	tr2.Fill(m2, 5*time.Second, time.Time{})
	if m2.SuccessInRetention == 0 || !m2.RetentionObserved {
		t.Fatalf("restored: success %v observed %v", m2.SuccessInRetention, m2.RetentionObserved)
	}
	if got := tr.LastSuccess()["m"]; got.IsZero() {
		t.Fatal("LastSuccess lost the model")
	}
}

func TestGatewayQueueSumsFreshReports(t *testing.T) {
	c := &clock{time.Unix(1000, 0)}
	tr := New(c.now)
	tr.ObserveQueue(&eventsv1.FlowControlQueue{Replica: "gw-0", Queued: map[string]int64{"m": 3, "x": 1}})
	c.advance(10 * time.Second)
	tr.ObserveQueue(&eventsv1.FlowControlQueue{Replica: "gw-1", Queued: map[string]int64{"m": 2}})
	if q := tr.GatewayQueue("m"); q != 5 {
		t.Fatalf("queue %v, want 5", q)
	}
	c.advance(6 * time.Second) // gw-0's report is 16 s old
	if q := tr.GatewayQueue("m"); q != 2 {
		t.Fatalf("queue %v, want 2 (gw-0 stale)", q)
	}
}

func TestUnregisteredEndpointsAndOtherModelsAreIgnored(t *testing.T) {
	c := &clock{time.Unix(1000, 0)}
	tr := New(c.now)
	other := &registryv1.Endpoint{Name: "p9", Model: "other", Labels: map[string]string{VariantLabel: "a"}}
	tr.SetEndpoints([]*registryv1.Endpoint{ep("p0", "a"), other, {Name: "nolabel", Model: "m"}})
	for _, name := range []string{"p0", "p9", "nolabel", "unknown"} {
		tr.ObserveMetrics(&eventsv1.PodMetrics{Endpoint: name})
	}
	tr.ObserveMetrics(&eventsv1.PodMetrics{Endpoint: "p0", Error: "scrape failed", WaitingRequests: 99})
	m := model("a")
	tr.Fill(m, time.Hour, time.Time{})
	if m.Variants[0].Ready != 1 || m.Variants[0].Replicas[0].Queue != 0 {
		t.Fatalf("variant a: %+v", m.Variants[0])
	}
	tr.SetEndpoints(nil)
	tr.Fill(m, time.Hour, time.Time{})
	if m.Variants[0].Ready != 0 {
		t.Fatal("a deregistered endpoint stays ready")
	}
}
