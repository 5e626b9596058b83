package p2psource

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/libs/scheduling/schedulingtest"
)

// matcher is a prefix producer whose match is given.
type matcher struct {
	scheduling.Named
	blocks map[string]int
}

func (m *matcher) MatchPrefix(_ context.Context, _ *scheduling.CycleState, _ *scheduling.Request, eps []*scheduling.Endpoint) *scheduling.PrefixMatch {
	pm := &scheduling.PrefixMatch{BlockSizeTokens: 16, TotalBlocks: 10}
	for _, e := range eps {
		if b := m.blocks[e.Name]; b > 0 {
			pm.Set(e.Name, e.NameHash(), b)
		}
	}
	return pm
}

func pool(waiting ...int) []*scheduling.Endpoint {
	eps := schedulingtest.Endpoints(len(waiting))
	for i, w := range waiting {
		eps[i].Metrics = &scheduling.Metrics{WaitingRequests: w}
	}
	return eps
}

func TestChooseSamplesWithinOneBlockByQueue(t *testing.T) {
	eps := pool(0, 3, 0, 0)
	m := (&matcher{blocks: map[string]int{eps[0].Name: 8, eps[1].Name: 7, eps[2].Name: 5}}).MatchPrefix(context.Background(), nil, nil, eps)
	counts := map[string]int{}
	const n = 4000
	for i := range n {
		e, cached := Choose(m, eps, uint64(float64(i)/n*math.MaxUint64))
		counts[e.Name]++
		if want := m.BlocksOf(e) * 16; cached != want {
			t.Fatalf("cached %d, want %d", cached, want)
		}
	}
	// eps[0] (8 blocks, idle: weight 1) and eps[1] (7, within a block,
	// 3 waiting: 1/4) share the pulls 4:1; eps[2] (3 blocks short) none
	if counts[eps[2].Name] != 0 || counts[eps[3].Name] != 0 {
		t.Fatalf("outside the band: %v", counts)
	}
	if got := float64(counts[eps[0].Name]) / float64(counts[eps[1].Name]); got < 3.8 || got > 4.2 {
		t.Errorf("pulls %v, want 4:1", counts)
	}
	if e, _ := Choose(&scheduling.PrefixMatch{}, eps, 7); e != nil {
		t.Error("a source with nothing cached")
	}
}

func producer(t *testing.T, blocks map[string]int, params string) *Producer {
	t.Helper()
	h := schedulingtest.NewHandle().Declare(&matcher{Named: scheduling.Named{Type: "approx-prefix-cache-producer", Name: "prefix"}, blocks: blocks})
	return schedulingtest.New[*Producer](t, h, Type, "p2p", params)
}

func TestHeaderOnlyWhenThePeerOutCachesTheComputingPod(t *testing.T) {
	eps := pool(0, 0, 0)
	p := producer(t, map[string]int{eps[0].Name: 6, eps[1].Name: 2}, `{"minCachedTokenDelta": 48}`)
	run := func(target *scheduling.Endpoint, prefillTarget *scheduling.Endpoint) map[string]string {
		cs := schedulingtest.CycleState(1)
		req := &scheduling.Request{ID: "r-1"}
		p.PrepareCycle(context.Background(), cs, req, eps)
		primary := &scheduling.ProfileResult{Profile: "decode", Targets: []scheduling.Target{{Endpoint: target}}}
		res := &scheduling.Result{Primary: primary, Profiles: []*scheduling.ProfileResult{primary}}
		if prefillTarget != nil {
			res.Profiles = append(res.Profiles, &scheduling.ProfileResult{Profile: "prefill", Targets: []scheduling.Target{{Endpoint: prefillTarget}}})
		}
		p.PreRequest(context.Background(), cs, req, res)
		return res.Headers
	}
	// the pod computing holds 2 blocks (32 tokens), the peer 6 (96): 64 >= 48
	if got := run(eps[1], nil)[Header]; got != eps[0].HostPort() {
		t.Errorf("header %q, want %s", got, eps[0].HostPort())
	}
	// the prefill pod computes the prompt: it holds nothing
	if got := run(eps[0], eps[2])[Header]; got != eps[0].HostPort() {
		t.Errorf("with a prefill stage: header %q", got)
	}
	// the source itself computes: no pull
	if h := run(eps[0], nil); h[Header] != "" {
		t.Errorf("the source serves: %v", h)
	}
	// a delta below minCachedTokenDelta: no pull
	q := producer(t, map[string]int{eps[0].Name: 6, eps[1].Name: 4}, `{"minCachedTokenDelta": 48}`)
	p = q
	if h := run(eps[1], nil); h[Header] != "" {
		t.Errorf("32 tokens more than the computing pod, below 48: %v", h)
	}
}

func TestParameterErrors(t *testing.T) {
	for params, want := range map[string]string{
		`{"minCachedTokenDelta": 0}`:              "minCachedTokenDelta",
		`{"prefixMatchInfoProducerName": "nope"}`: "prefixMatchInfoProducerName",
	} {
		h := schedulingtest.NewHandle().Declare(&matcher{Named: scheduling.Named{Type: "approx-prefix-cache-producer", Name: "prefix"}})
		if _, err := schedulingtest.NewErr(h, Type, "p2p", params); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", params, err, want)
		}
	}
	if _, err := schedulingtest.NewErr(schedulingtest.NewHandle(), Type, "p2p", ""); err == nil || !strings.Contains(err.Error(), "no prefix-cache producer") {
		t.Errorf("without a producer: %v", err)
	}
}
