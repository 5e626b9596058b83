package prefix_test

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/hermod/hermod/libs/plugins/prefix"
	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/libs/scheduling/schedulingtest"
)

// The v0.9+ split: approx-prefix-cache-producer keeps the index, and
// prefix-cache-scorer reads it by the producer's name; two scorers may read
// one producer. Routed prompts come back to where they went.
func TestProducerAndBoundScorers(t *testing.T) {
	for name, cfg := range map[string]string{
		"named": `
plugins:
- name: cpu-prefix
  type: approx-prefix-cache-producer
  parameters: {autoTune: false, lruCapacityPerServer: 1000}
- name: by-share
  type: prefix-cache-scorer
  parameters: {prefixMatchInfoProducerName: cpu-prefix}
- name: by-length
  type: prefix-cache-scorer
  parameters: {prefixMatchInfoProducerName: cpu-prefix, matchLengthWeight: 1, matchLengthScaleTokens: 320}
- type: max-score-picker
schedulingProfiles:
- name: default
  plugins: [{pluginRef: by-share}, {pluginRef: by-length}, {pluginRef: max-score-picker}]
`,
		// no name: the producer of the default name, when declared
		"default name": `
plugins:
- type: approx-prefix-cache-producer
  parameters: {autoTune: false}
- name: by-share
  type: prefix-cache-scorer
- name: by-length
  type: prefix-cache-scorer
  parameters: {matchLengthWeight: 1, matchLengthScaleTokens: 320}
- type: max-score-picker
schedulingProfiles:
- name: default
  plugins: [{pluginRef: by-share}, {pluginRef: by-length}, {pluginRef: max-score-picker}]
`,
	} {
		t.Run(name, func(t *testing.T) {
			s := schedulingtest.Scheduler(t, cfg)
			d := s.Describe()
			for _, p := range d.Plugins {
				if _, bound := p.Parameters.(prefix.BoundParams); p.Type == prefix.Type && !bound {
					t.Errorf("%s is not bound to the producer: %+v", p.Name, p.Parameters)
				}
			}
			ctx := context.Background()
			eps := schedulingtest.Endpoints(4)
			where := map[string]string{}
			for i := range 8 {
				pr := prompt(fmt.Sprint("conversation ", i), 10)
				res, err := s.Schedule(ctx, schedulingtest.Completion(fmt.Sprint(i), "m", pr), eps)
				if err != nil {
					t.Fatal(err)
				}
				where[pr] = res.Target().Endpoint.Name
				res.Release()
			}
			for pr, first := range where {
				// half the prompt shared: share 0.5; length 5 blocks x 16
				// tokens = 80 of 320 tokens: (80/320)^2
				half := pr[:5*defaultBlockChars] + prompt("fresh", 5)
				res, err := s.Schedule(ctx, schedulingtest.Completion("half", "m", half), eps)
				if err != nil {
					t.Fatal(err)
				}
				if got := res.Target().Endpoint.Name; got != first {
					t.Errorf("half-shared prompt went to %s, first to %s", got, first)
				}
				for j, e := range eps {
					want := [2]float64{}
					if e.Name == first {
						want = [2]float64{0.5, 1.0 / 16}
					}
					for k := range 2 {
						if got := res.Primary.Score(k, j); math.Abs(got-want[k]) > 1e-9 {
							t.Errorf("scorer %d on %s: %v, want %v", k, e.Name, got, want[k])
						}
					}
				}
				res.Release()
			}
		})
	}
}

// A scorer with an index of its own blends the length in the same way.
func TestMatchLengthWeight(t *testing.T) {
	p := newPlugin(t, `{"matchLengthWeight": 0.5, "matchLengthScaleTokens": 80}`)
	eps := schedulingtest.Endpoints(2)
	a := prompt("a", 10)
	route(t, p, schedulingtest.Completion("1", "m", a), eps, eps[0], nil)
	// 10 of 10 blocks (160 tokens, over the 80 that score 1): 0.5 x 1 + 0.5 x 1
	if got := score(p, schedulingtest.Completion("2", "m", a), eps); !approxEqual(got, []float64{1, 0}) {
		t.Errorf("whole prompt: %v", got)
	}
	// 2 of 10 blocks, 32 of 80 tokens: 0.5 x 0.4^2 + 0.5 x 0.2
	half := a[:2*defaultBlockChars] + prompt("b", 8)
	if got := score(p, schedulingtest.Completion("3", "m", half), eps); !approxEqual(got, []float64{0.5*0.16 + 0.5*0.2, 0}) {
		t.Errorf("two blocks: %v", got)
	}
}

// The producer's match bound is upstream's, in tokens: 131072 by default,
// maxPrefixTokensToMatch otherwise; maxPrefixBlocksToMatch still wins.
func TestProducerParams(t *testing.T) {
	for params, want := range map[string]int{
		``:                                   131072 / 16,
		`{"maxPrefixTokensToMatch": 100000}`: 6250,
		`{"maxPrefixTokensToMatch": 100, "blockSizeTokens": 64}`: 2,
		`{"maxPrefixBlocksToMatch": 7}`:                          7,
	} {
		for _, typ := range []string{prefix.ProducerType, prefix.MultiClusterProducerType} {
			p := schedulingtest.New[*prefix.Producer](t, schedulingtest.NewHandle(), typ, "", params)
			if got := p.Parameters().(prefix.Params).MaxPrefixBlocksToMatch; got != want {
				t.Errorf("%s %s: maxPrefixBlocksToMatch %d, want %d", typ, params, got, want)
			}
			if p.TypedName().Type != typ {
				t.Errorf("type %s, want %s", p.TypedName().Type, typ)
			}
		}
	}
	if _, ok := any(&prefix.Producer{}).(scheduling.Scorer); ok {
		t.Error("the producer scores")
	}
}

func TestBoundScorerErrors(t *testing.T) {
	for cfg, want := range map[string]string{
		"plugins: [{type: max-score-picker, name: q}, {type: prefix-cache-scorer, parameters: {prefixMatchInfoProducerName: q}}]":                                                   `plugin "q" (type max-score-picker) produces no prefix match`,
		"plugins: [{type: prefix-cache-scorer, parameters: {prefixMatchInfoProducerName: nope}}]":                                                                                   `no plugin named "nope" is declared`,
		"plugins: [{type: prefix-cache-scorer, parameters: {prefixMatchInfoProducerName: p}}, {type: approx-prefix-cache-producer, name: p}]":                                       "declared later",
		"plugins: [{type: approx-prefix-cache-producer}, {type: prefix-cache-scorer, parameters: {prefixMatchInfoProducerName: approx-prefix-cache-producer, blockSizeTokens: 8}}]": "belong to the producer",
		"plugins: [{type: prefix-cache-scorer, parameters: {matchLengthWeight: 2}}]":                                                                                                "matchLengthWeight: must be between 0 and 1",
		"plugins: [{type: approx-prefix-cache-producer, parameters: {maxPrefixTokensToMatch: 0}}]":                                                                                  "maxPrefixTokensToMatch: must be at least 1",
	} {
		c, err := scheduling.ParseConfig([]byte(cfg))
		if err != nil {
			t.Fatal(err)
		}
		if s, err := scheduling.New(c); err == nil || !strings.Contains(err.Error(), want) {
			if s != nil {
				_ = s.Close()
			}
			t.Errorf("%s: error %v, want %q", cfg, err, want)
		}
	}
}

// The multi-cluster pair: the scorer reads the multicluster producer
// declared under its type's name (or one it names), keeps an index of its
// own without one, and scores as prefix-cache-scorer.
func TestMultiClusterScorerBinding(t *testing.T) {
	s := schedulingtest.Scheduler(t, `
plugins:
- type: multicluster-approx-prefix-cache-producer
  parameters: {autoTune: false}
- type: multicluster-prefix-cache-scorer
- name: own
  type: multicluster-prefix-cache-scorer
  parameters: {blockSizeTokens: 16}
- type: max-score-picker
schedulingProfiles:
- name: default
  plugins: [{pluginRef: multicluster-prefix-cache-scorer}, {pluginRef: own}, {pluginRef: max-score-picker}]
`)
	bound := 0
	for _, p := range s.Describe().Plugins {
		if p.Type != prefix.MultiClusterType {
			continue
		}
		b, ok := p.Parameters.(prefix.BoundParams)
		switch p.Name {
		case "own":
			if ok {
				t.Errorf("own is bound: %+v", b)
			}
		default:
			if !ok || b.PrefixMatchInfoProducerName != prefix.MultiClusterProducerType {
				t.Errorf("%s reads %+v", p.Name, p.Parameters)
			}
			bound++
		}
	}
	if bound != 1 {
		t.Errorf("%d bound multicluster scorers", bound)
	}
	ctx := context.Background()
	eps := schedulingtest.Endpoints(3)
	pr := prompt("conversation", 10)
	res, err := s.Schedule(ctx, schedulingtest.Completion("1", "m", pr), eps)
	if err != nil {
		t.Fatal(err)
	}
	first := res.Target().Endpoint.Name
	res.Release()
	half := pr[:5*defaultBlockChars] + prompt("fresh", 5)
	res, err = s.Schedule(ctx, schedulingtest.Completion("2", "m", half), eps)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Release()
	for j, e := range eps {
		want := 0.0
		if e.Name == first {
			want = 0.5
		}
		for k := range 2 {
			if got := res.Primary.Score(k, j); math.Abs(got-want) > 1e-9 {
				t.Errorf("scorer %d on %s: %v, want %v", k, e.Name, got, want)
			}
		}
	}
}
