package endpoints

import (
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	registryv1 "github.com/hermod/hermod/libs/api/hermod/registry/v1"
	"github.com/hermod/hermod/libs/scheduling"
)

func reg(name, addr string, port int32, model string, served ...string) *registryv1.Endpoint {
	return &registryv1.Endpoint{Name: name, Pool: "p", Address: addr, Port: port, Model: model, ServedModels: served,
		Labels: map[string]string{"role": "decode"}}
}

func scrape(name string, at time.Time, waiting int64, failures int32) *eventsv1.PodMetrics {
	return &eventsv1.PodMetrics{Pool: "p", Endpoint: name, Time: timestamppb.New(at), WaitingRequests: waiting,
		KvCacheUsage: 0.25, BlockSize: 16, NumGpuBlocks: 1000, ConsecutiveFailures: failures,
		RunningLoraAdapters: []string{"a"}}
}

func names(eps []*scheduling.Endpoint) []string {
	out := []string{}
	for _, e := range eps {
		out = append(out, e.Name)
	}
	return out
}

// An endpoint registered without a model (an upstream-format endpoints
// file) lists its base model beside its adapters: neither is taken for an
// adapter.
func TestModelsOfAnEndpointWithoutARegisteredModel(t *testing.T) {
	s := New(Options{})
	defer s.Close()
	s.SetRegistry(1, map[string]*registryv1.Endpoint{"c": reg("c", "10.0.0.3", 8000, "", "qwen", "qwen-lora")})
	if v := s.View(); v.IsAdapter("qwen") || v.IsAdapter("qwen-lora") || !v.Serves("qwen") {
		t.Error("the models of an endpoint without a registered model taken for adapters")
	}
}

func TestViewMergesRegistryAndMetrics(t *testing.T) {
	var removed []string
	s := New(Options{OnRemove: func(n string) { removed = append(removed, n) }})
	defer s.Close()
	s.SetRegistry(5, map[string]*registryv1.Endpoint{
		"b": reg("b", "10.0.0.2", 8000, "llama", "llama", "sql-lora"),
		"a": reg("a", "10.0.0.1", 8000, "llama"),
	})
	v := s.View()
	if got := names(v.Candidates); !slices.Equal(got, []string{"a", "b"}) || v.Registered != 2 || v.Revision != 5 {
		t.Fatalf("candidates %v registered %d revision %d", got, v.Registered, v.Revision)
	}
	if v.Candidates[0].Metrics != nil {
		t.Error("metrics before any scrape")
	}
	if v.IsAdapter("llama") || !v.IsAdapter("sql-lora") || !v.Serves("sql-lora") || v.Serves("gpt") || v.IsAdapter("gpt") {
		t.Error("model sets wrong")
	}

	if got := v.Models(); !slices.Equal(got, []string{"llama", "sql-lora"}) {
		t.Errorf("models %v", got)
	}
	if e, ok := v.ByAddress("10.0.0.2:8000"); !ok || e.Name != "b" || e.Labels["role"] != "decode" {
		t.Errorf("by address: %v %v", e, ok)
	}

	now := time.Now()
	s.UpdateMetrics(scrape("a", now, 7, 0))
	s.Flush()
	a, _ := s.View().Lookup("a")
	if a.Metrics == nil || a.Metrics.WaitingRequests != 7 || a.Metrics.KVCacheUsage != 0.25 || a.Metrics.BlockSize != 16 ||
		a.Metrics.NumGPUBlocks != 1000 || !slices.Equal(a.Metrics.RunningLoRAs, []string{"a"}) || !a.Metrics.UpdatedAt.Equal(now) {
		t.Errorf("metrics of a: %+v", a.Metrics)
	}
	// An older scrape arriving late is ignored.
	s.UpdateMetrics(scrape("a", now.Add(-time.Second), 1, 0))
	s.Flush()
	if a, _ := s.View().Lookup("a"); a.Metrics.WaitingRequests != 7 {
		t.Errorf("older scrape applied: waiting %d", a.Metrics.WaitingRequests)
	}
	// The unchanged endpoint keeps its pointer across views.
	b1, _ := v.Lookup("b")
	b2, _ := s.View().Lookup("b")
	if b1 != b2 {
		t.Error("unchanged endpoint rebuilt")
	}

	s.SetRegistry(6, map[string]*registryv1.Endpoint{"b": reg("b", "10.0.0.2", 8000, "llama")})
	if got := names(s.View().Candidates); !slices.Equal(got, []string{"b"}) || !slices.Equal(removed, []string{"a"}) {
		t.Errorf("after a left: candidates %v removed %v", got, removed)
	}
}

func TestFailingEndpointLeavesCandidates(t *testing.T) {
	s := New(Options{MaxFailures: 3})
	defer s.Close()
	s.SetRegistry(1, map[string]*registryv1.Endpoint{"a": reg("a", "h", 1, "m"), "b": reg("b", "h", 2, "m")})
	now := time.Now()
	for i, f := range []int32{1, 2, 3} {
		s.UpdateMetrics(scrape("a", now.Add(time.Duration(i)*time.Millisecond), 0, f))
		s.Flush()
		want := []string{"a", "b"}
		if f >= 3 {
			want = []string{"b"}
		}
		if got := names(s.View().Candidates); !slices.Equal(got, want) {
			t.Errorf("after %d failures: %v, want %v", f, got, want)
		}
	}
	if _, ok := s.View().Lookup("a"); !ok {
		t.Error("a failing endpoint is still registered")
	}
	s.UpdateMetrics(scrape("a", now.Add(time.Second), 0, 0))
	s.Flush()
	if got := names(s.View().Candidates); len(got) != 2 {
		t.Errorf("recovered endpoint not back: %v", got)
	}
}

func TestMetricsUpdatesAreCoalesced(t *testing.T) {
	s := New(Options{Coalesce: 20 * time.Millisecond})
	defer s.Close()
	s.SetRegistry(1, map[string]*registryv1.Endpoint{"a": reg("a", "h", 1, "m")})
	v0 := s.View()
	now := time.Now()
	for i := range 50 {
		s.UpdateMetrics(scrape("a", now.Add(time.Duration(i)), int64(i), 0))
	}
	if s.View() != v0 {
		t.Error("a view was published before the coalescing delay")
	}
	deadline := time.Now().Add(2 * time.Second)
	for s.View() == v0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if a, _ := s.View().Lookup("a"); a.Metrics == nil || a.Metrics.WaitingRequests != 49 {
		t.Errorf("coalesced view: %+v", a.Metrics)
	}
}

func TestServedModelsPreferTheCollector(t *testing.T) {
	s := New(Options{})
	defer s.Close()
	s.SetRegistry(1, map[string]*registryv1.Endpoint{"a": reg("a", "h", 1, "base")})
	if a, _ := s.View().Lookup("a"); !slices.Equal(a.Models, []string{"base"}) {
		t.Errorf("models from the base model: %v", a.Models)
	}
	m := scrape("a", time.Now(), 0, 0)
	m.ServedModels = []string{"base", "lora-x"}
	s.UpdateMetrics(m)
	s.Flush()
	if a, _ := s.View().Lookup("a"); !slices.Equal(a.Models, []string{"base", "lora-x"}) || !s.View().Serves("lora-x") {
		t.Errorf("models from /v1/models: %v", a.Models)
	}
}

// The data layer's attributes and the node's address reach the scheduler's
// endpoint.
func TestAttributesAndNodeAddressReachTheEndpoint(t *testing.T) {
	s := New(Options{})
	defer s.Close()
	r := reg("a", "10.0.0.1", 8000, "llama")
	r.NodeAddress = "192.168.1.7"
	s.SetRegistry(1, map[string]*registryv1.Endpoint{"a": r})
	m := scrape("a", time.Now(), 2, 0)
	m.Attributes = map[string]float64{"GPUUtilization/dcgm-extractor": 0.42}
	s.UpdateMetrics(m)
	s.Flush()
	a, _ := s.View().Lookup("a")
	if a.NodeAddress != "192.168.1.7" {
		t.Errorf("node address %q", a.NodeAddress)
	}
	if v, ok := a.Attribute("GPUUtilization/dcgm-extractor"); !ok || v != 0.42 {
		t.Errorf("GPU utilisation %v %v", v, ok)
	}
	if v, ok := a.Attribute(scheduling.AttributeWaitingQueueSize); !ok || v != 2 {
		t.Errorf("WaitingQueueSize %v %v", v, ok)
	}
}
