package burstprefix_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	"github.com/hermod/hermod/libs/plugins/burstprefix"
	_ "github.com/hermod/hermod/libs/plugins/picker"
	_ "github.com/hermod/hermod/libs/plugins/prefix"
	_ "github.com/hermod/hermod/libs/plugins/profilehandler"
	_ "github.com/hermod/hermod/libs/plugins/scorer"
	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/libs/scheduling/schedulingtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const config = `
apiVersion: llm-d.ai/v1alpha1
kind: EndpointPickerConfig
plugins:
- type: single-profile-handler
- type: burst-prefix-cache-producer
  parameters: %s
- type: prefix-cache-scorer
  parameters:
    prefixMatchInfoProducerName: burst-prefix-cache-producer
- type: queue-scorer
- type: max-score-picker
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: prefix-cache-scorer
    weight: 2
  - pluginRef: queue-scorer
  - pluginRef: max-score-picker
`

// burst schedules the prompts at once and returns the endpoint each went
// to.
func burst(t *testing.T, s *scheduling.Scheduler, eps []*scheduling.Endpoint, prompts ...string) []string {
	t.Helper()
	out := make([]string, len(prompts))
	var wg sync.WaitGroup
	for i, p := range prompts {
		wg.Go(func() {
			res, err := s.Schedule(context.Background(), schedulingtest.Completion(fmt.Sprint("r-", i), "m", p), eps)
			if err != nil {
				t.Error(err)
				return
			}
			defer res.Release()
			out[i] = res.Target().Endpoint.Name
		})
	}
	wg.Wait()
	return out
}

func repeat(p string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = p
	}
	return out
}

// The samples of one prompt, arriving together on a cold pool, land on
// one replica (queue-scorer alone would spread them: the pool is idle);
// with maxPerReplica 2 on two replicas each.
func TestBurstOfOnePromptIsColocated(t *testing.T) {
	t.Parallel()
	prompt := strings.Repeat("You are a careful grader of proofs. ", 40)
	eps := schedulingtest.Endpoints(4)
	s := schedulingtest.Scheduler(t, fmt.Sprintf(config, `{"windowDurationMs": 1500}`))
	if got := burst(t, s, eps, repeat(prompt, 6)...); len(distinct(got)) != 1 {
		t.Errorf("maxPerReplica -1: targets %v, want one replica", got)
	}
	s = schedulingtest.Scheduler(t, fmt.Sprintf(config, `{"windowDurationMs": 1500, "maxPerReplica": 2}`))
	got := burst(t, s, eps, repeat(prompt, 6)...)
	for name, n := range distinct(got) {
		if n != 2 {
			t.Errorf("maxPerReplica 2: %d requests on %s (targets %v)", n, name, got)
		}
	}
}

func distinct(names []string) map[string]int {
	c := map[string]int{}
	for _, n := range names {
		c[n]++
	}
	return c
}

// A request sharing nothing with its window gains no affinity; one whose
// context ends while it waits leaves without.
func TestUnsharedAndCanceledRequestsGainNoAffinity(t *testing.T) {
	t.Parallel()
	h := schedulingtest.NewHandle()
	p := schedulingtest.New[*burstprefix.Producer](t, h, burstprefix.Type, "burst", `{"windowDurationMs": 20}`)
	eps := schedulingtest.Endpoints(3)
	cs := schedulingtest.CycleState(1)
	req := schedulingtest.Completion("r-1", "m", strings.Repeat("a unique prompt ", 100))
	p.PrepareCycle(context.Background(), cs, req, eps)
	if m := p.MatchPrefix(context.Background(), cs, req, eps); m != nil {
		t.Errorf("alone in its window: match %v", m.Matched())
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	cs = schedulingtest.CycleState(1)
	start := time.Now()
	p.PrepareCycle(ctx, cs, req, eps)
	if waited := time.Since(start); waited > 15*time.Millisecond {
		t.Errorf("a canceled request waited %s", waited)
	}
	if m := p.MatchPrefix(context.Background(), cs, req, eps); m != nil {
		t.Error("a canceled request gained an affinity")
	}
	time.Sleep(40 * time.Millisecond) // the window the canceled request opened closes
	want := `
# HELP hermod_burst_prefix_requests_total Requests seen by burst-prefix-cache-producer, by outcome: steered (an affinity to one replica), unsteered (no prefix shared in the window), batch_full (the window held maxBatchSize requests), canceled (the request ended while its window was open).
# TYPE hermod_burst_prefix_requests_total counter
hermod_burst_prefix_requests_total{outcome="canceled",plugin_name="burst"} 1
hermod_burst_prefix_requests_total{outcome="unsteered",plugin_name="burst"} 1
`
	if err := testutil.GatherAndCompare(h.Metrics, strings.NewReader(want), "hermod_burst_prefix_requests_total"); err != nil {
		t.Error(err)
	}
}

func TestParameters(t *testing.T) {
	t.Parallel()
	for params, field := range map[string]string{
		`{"windowDurationMs": 0}`:        "windowDurationMs",
		`{"windowDurationMs": 10001}`:    "windowDurationMs",
		`{"maxPerReplica": 0}`:           "maxPerReplica",
		`{"blockSizeTokens": 0}`:         "blockSizeTokens",
		`{"maxPrefixTokensToMatch": 32}`: "maxPrefixTokensToMatch",
		`{"maxPrefixTokensToMatch": -1}`: "maxPrefixTokensToMatch",
		`{"minColocateBlocks": -1}`:      "minColocateBlocks",
		`{"maxBatchSize": 0}`:            "maxBatchSize",
		`{"balanceBy": "bytes"}`:         "balanceBy",
	} {
		_, err := schedulingtest.NewErr(schedulingtest.NewHandle(), burstprefix.Type, "", params)
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: error %v, want one naming %s", params, err, field)
		}
	}
	h := schedulingtest.NewHandle()
	schedulingtest.New[*burstprefix.Producer](t, h, burstprefix.Type, "", `{"windowDurationMs": 2500}`)
	if len(h.Warnings) != 1 || !strings.Contains(h.Warnings[0], "pick-timeout") {
		t.Errorf("a 2.5 s window: warnings %q, want one about the pick deadlines", h.Warnings)
	}
	p := schedulingtest.New[*burstprefix.Producer](t, schedulingtest.NewHandle(), burstprefix.Type, "", "")
	want := burstprefix.Params{WindowDurationMs: 100, MaxPerReplica: -1, BlockSizeTokens: 64, MaxBatchSize: 1000, BalanceBy: burstprefix.BalanceRequests}
	if got := p.Parameters(); got != want {
		t.Errorf("defaults %+v, want %+v", got, want)
	}
}
