package mmcache_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/hermod/hermod/libs/openai"
	"github.com/hermod/hermod/libs/plugins/mmcache"
	_ "github.com/hermod/hermod/libs/plugins/picker"
	_ "github.com/hermod/hermod/libs/plugins/profilehandler"
	_ "github.com/hermod/hermod/libs/plugins/scorer"
	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/libs/scheduling/schedulingtest"
)

// chat is a chat request whose user message shows the given images.
func chat(t *testing.T, id string, images ...string) *scheduling.Request {
	t.Helper()
	parts := []string{`{"type": "text", "text": "what do these show?"}`}
	for _, img := range images {
		parts = append(parts, fmt.Sprintf(`{"type": "image_url", "image_url": {"url": "https://example.com/%s.png"}}`, img))
	}
	body := `{"model": "m", "messages": [{"role": "user", "content": [` + strings.Join(parts, ",") + `]}]}`
	req, err := schedulingtest.ParseRequest(openai.APIChatCompletions, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	req.ID = id
	return req
}

const config = `
plugins:
- type: mm-embeddings-cache-producer
  parameters: {cacheSizeInMBPerServer: %d}
- type: mm-embeddings-cache-scorer
- type: queue-scorer
- type: max-score-picker
schedulingProfiles:
- name: default
  plugins:
  - {pluginRef: mm-embeddings-cache-scorer, weight: 4}
  - {pluginRef: queue-scorer, weight: 1}
  - {pluginRef: max-score-picker}
`

func schedule(t *testing.T, s *scheduling.Scheduler, req *scheduling.Request, eps []*scheduling.Endpoint) string {
	t.Helper()
	res, err := s.Schedule(context.Background(), req, eps)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Release()
	return res.Target().Endpoint.Name
}

// A request showing images another request showed goes where that one
// went, even against the queue; a request showing new images goes by the
// queue; the memory per pod is bounded by the budget.
func TestRequestsFollowTheirImages(t *testing.T) {
	eps := schedulingtest.Waiting(0, 0, 0)
	s := schedulingtest.Scheduler(t, fmt.Sprintf(config, 4096))
	first := schedule(t, s, chat(t, "r-1", "cat", "dog"), eps)
	for _, e := range eps {
		if e.Name == first {
			e.Metrics.WaitingRequests = 3 // now the busiest
		}
	}
	if got := schedule(t, s, chat(t, "r-2", "dog", "cat", "cat"), eps); got != first {
		t.Errorf("the same images went to %s, want %s (where they were encoded)", got, first)
	}
	if got := schedule(t, s, chat(t, "r-3", "owl"), eps); got == first {
		t.Errorf("a new image went to the busiest pod %s", got)
	}

	// A budget of 2 MiB remembers one item per pod.
	small := schedulingtest.Scheduler(t, fmt.Sprintf(config, 2))
	eps = schedulingtest.Waiting(0, 0, 0)
	pod := schedule(t, small, chat(t, "r-1", "cat"), eps)
	schedule(t, small, chat(t, "r-2", "dog"), []*scheduling.Endpoint{podNamed(eps, pod)}) // evicts the cat
	for _, e := range eps {
		if e.Name == pod {
			e.Metrics.WaitingRequests = 3
		}
	}
	if got := schedule(t, small, chat(t, "r-3", "cat"), eps); got == pod {
		t.Errorf("the evicted image still drew its request to %s", got)
	}
}

func podNamed(eps []*scheduling.Endpoint, name string) *scheduling.Endpoint {
	for _, e := range eps {
		if e.Name == name {
			return e
		}
	}
	return nil
}

// The scorer's score is the share of the request's distinct items a pod
// holds; the lookups are counted by modality.
func TestScoreAndMetrics(t *testing.T) {
	h := schedulingtest.NewHandle()
	p := schedulingtest.New[*mmcache.Producer](t, h, mmcache.ProducerType, "", "")
	h.Declare(p)
	sc := schedulingtest.New[*mmcache.Scorer](t, h, mmcache.ScorerType, "", "")
	eps := schedulingtest.Endpoints(2)

	// pod-0 encoded the cat and the dog.
	cs := schedulingtest.CycleState(1)
	req := chat(t, "r-1", "cat", "dog")
	primary := &scheduling.ProfileResult{Profile: "default", Targets: []scheduling.Target{{Endpoint: eps[0]}}}
	res := &scheduling.Result{DecisionID: 1, Primary: primary, Profiles: []*scheduling.ProfileResult{primary}}
	p.PrepareCycle(context.Background(), cs, req, eps)
	schedulingtest.PreRequest(context.Background(), p, cs, req, res)

	cs = schedulingtest.CycleState(1)
	req = chat(t, "r-2", "cat", "owl", "owl", "emu")
	scores := schedulingtest.Score(sc, cs, req, eps)
	if scores[0] != 1.0/3 || scores[1] != 0 {
		t.Errorf("scores %v, want [1/3 0]: one of three distinct items held", scores)
	}
	if got := schedulingtest.Score(sc, schedulingtest.CycleState(1), chat(t, "r-3"), eps); got[0] != 0 || got[1] != 0 {
		t.Errorf("no images: %v", got)
	}
	res = &scheduling.Result{DecisionID: 2, Primary: primary, Profiles: []*scheduling.ProfileResult{primary}}
	schedulingtest.PreRequest(context.Background(), p, cs, req, res)
	if n := sum(t, h, "llm_d_epp_encoder_cache_queries_total"); n != 5 {
		t.Errorf("%v queries, want 5 (2 + 3 distinct)", n)
	}
	if n := sum(t, h, "llm_d_epp_encoder_cache_hits_total"); n != 1 {
		t.Errorf("%v hits, want 1 (the cat on pod-0)", n)
	}
	p.EndpointRemoved(eps[0].Name)
	if got := schedulingtest.Score(sc, schedulingtest.CycleState(1), chat(t, "r-4", "cat"), eps); got[0] != 0 {
		t.Errorf("after pod-0 left: %v", got)
	}
}

// sum adds up the samples of a counter family of h's registry.
func sum(t *testing.T, h *schedulingtest.Handle, name string) float64 {
	t.Helper()
	families, err := h.Metrics.Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, f := range families {
		if f.GetName() == name {
			for _, m := range f.GetMetric() {
				total += m.GetCounter().GetValue()
			}
		}
	}
	return total
}
