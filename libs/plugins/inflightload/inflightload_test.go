package inflightload_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/hermod/hermod/libs/plugins/inflightload"
	_ "github.com/hermod/hermod/libs/plugins/standard" // every plugin type
	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/libs/scheduling/schedulingtest"
)

// producer returns the scheduler's inflight-load-producer (declared or
// made by default).
func producer(t *testing.T, s *scheduling.Scheduler) scheduling.InFlightLoader {
	t.Helper()
	for _, p := range s.Plugins() {
		if l, ok := p.(*inflightload.Producer); ok {
			return l
		}
	}
	t.Fatal("no inflight-load-producer")
	return nil
}

// A decision loads its target with a request and the prompt's tokens
// (4 characters a token) plus, with addEstimatedOutputTokens, its expected
// output (prompt x outputRatio, capped by max_tokens and
// maxEstimatedOutputTokens); its completion unloads it.
func TestLoadFollowsDecisionsAndCompletions(t *testing.T) {
	s := schedulingtest.Scheduler(t, `
plugins:
- type: inflight-load-producer
  parameters: {addEstimatedOutputTokens: true, outputRatio: 0.5, maxEstimatedOutputTokens: 30}
- type: token-load-scorer
  parameters: {queueThresholdTokens: 1000}
- type: max-score-picker
`)
	l := producer(t, s)
	ctx := context.Background()
	eps := schedulingtest.Endpoints(2)
	prompt := strings.Repeat("abcd", 100) // 100 tokens; output min(50, 30)
	res, err := s.Schedule(ctx, schedulingtest.Completion("a", "m", prompt), eps)
	if err != nil {
		t.Fatal(err)
	}
	first := res.Target().Endpoint
	if got := l.InFlightLoad(first); got != (scheduling.InFlightLoad{Requests: 1, Tokens: 130}) {
		t.Fatalf("after one decision: %+v", got)
	}
	// the next goes to the other endpoint: its tokens score it higher
	res2, err := s.Schedule(ctx, schedulingtest.Completion("b", "m", prompt), eps)
	if err != nil {
		t.Fatal(err)
	}
	if res2.Target().Endpoint == first {
		t.Errorf("token-load-scorer sent the second request to the loaded endpoint (scores %v)", res2.Primary.Score(0, 0))
	}
	if got := res2.Primary.Score(0, indexOf(eps, first)); got != 1-130.0/1000 {
		t.Errorf("score of the loaded endpoint %v, want %v", got, 1-130.0/1000)
	}
	s.ResponseComplete(ctx, scheduling.NewResponse(res, 200))
	if got := l.InFlightLoad(first); got != (scheduling.InFlightLoad{}) {
		t.Errorf("after its completion: %+v", got)
	}
	res.Release()
	res2.Release()
}

// The tokens an endpoint already holds (its prefix producer's match) do
// not load it again.
func TestCachedTokensAreNotCounted(t *testing.T) {
	s := schedulingtest.Scheduler(t, `
plugins:
- type: approx-prefix-cache-producer
  parameters: {autoTune: false, blockSizeTokens: 16}
- type: prefix-cache-scorer
- type: inflight-load-producer
- type: max-score-picker
schedulingProfiles:
- name: default
  plugins: [{pluginRef: prefix-cache-scorer}, {pluginRef: max-score-picker}]
`)
	l := producer(t, s)
	ctx := context.Background()
	eps := schedulingtest.Endpoints(1)
	prompt := strings.Repeat("x", 64*10) // 10 blocks of 16 tokens
	res, err := s.Schedule(ctx, schedulingtest.Completion("a", "m", prompt), eps)
	if err != nil {
		t.Fatal(err)
	}
	res.Release()
	res, err = s.Schedule(ctx, schedulingtest.Completion("b", "m", prompt+strings.Repeat("y", 40)), eps)
	if err != nil {
		t.Fatal(err)
	}
	res.Release()
	// first 160 tokens, then 170 of which 160 were cached: 10
	if got := l.InFlightLoad(eps[0]); got != (scheduling.InFlightLoad{Requests: 2, Tokens: 170}) {
		t.Errorf("load %+v, want 2 requests and 160 + 10 tokens", got)
	}
}

// Consumers that name no producer share one made by default; naming one
// binds to it.
func TestConsumersShareTheDefaultProducer(t *testing.T) {
	s := schedulingtest.Scheduler(t, `
plugins:
- {type: token-load-scorer, name: a}
- {type: token-load-scorer, name: b}
- {type: max-score-picker}
`)
	n := 0
	for _, p := range s.Plugins() {
		if _, ok := p.(*inflightload.Producer); ok {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d producers, want one shared", n)
	}
	for cfg, want := range map[string]string{
		"plugins: [{type: token-load-scorer, parameters: {inFlightLoadProducerName: nope}}]":                                       `no plugin named "nope"`,
		"plugins: [{type: max-score-picker}, {type: token-load-scorer, parameters: {inFlightLoadProducerName: max-score-picker}}]": "produces no in-flight load",
		"plugins: [{type: inflight-load-producer, parameters: {outputRatio: -1}}]":                                                 "outputRatio: must not be negative",
		"plugins: [{type: token-load-scorer, parameters: {queueThresholdTokens: 0}}]":                                              "queueThresholdTokens: must be at least 1",
	} {
		c, err := scheduling.ParseConfig([]byte(cfg))
		if err != nil {
			t.Fatal(err)
		}
		if s, err := scheduling.New(c); err == nil || !strings.Contains(err.Error(), want) {
			if s != nil {
				_ = s.Close()
			}
			t.Errorf("%s: %v, want %q", cfg, err, want)
		}
	}
}

func indexOf(eps []*scheduling.Endpoint, e *scheduling.Endpoint) int {
	for i, x := range eps {
		if x == e {
			return i
		}
	}
	panic(fmt.Sprint("not a candidate: ", e.Name))
}
