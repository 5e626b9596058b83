package preciseprefix_test

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/hermod/hermod/libs/plugins/preciseprefix"
	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/libs/scheduling/schedulingtest"
)

// precise-prefix-cache-producer + prefix-cache-scorer reading it (the
// v0.9+ way to configure precise prefix routing): the scorer scores the
// index's matched share of the prompt, and with speculativeIndexing the
// producer's decisions say where the blocks will be, as the scorer's do.
func TestPreciseProducerFeedsPrefixCacheScorer(t *testing.T) {
	idx := &fakeIndexer{blocks: map[string]int{"pod-1": 5, "pod-2": 10}}
	cfg := `
apiVersion: llm-d.ai/v1alpha1
kind: EndpointPickerConfig
plugins:
- type: precise-prefix-cache-producer
  parameters:
    speculativeIndexing: true
    indexerConfig: {tokenizersPoolConfig: {modelName: builtin}}
    tokenProcessorConfig: {blockSize: 4}
- type: prefix-cache-scorer
  parameters: {prefixMatchInfoProducerName: precise-prefix-cache-producer}
- type: no-hit-lru-scorer
  parameters: {prefixMatchInfoProducerName: precise-prefix-cache-producer}
- type: max-score-picker
schedulingProfiles:
- name: default
  plugins: [{pluginRef: prefix-cache-scorer}, {pluginRef: max-score-picker}]
`
	s := schedulingtest.Scheduler(t, cfg, preciseprefix.IndexerService.Provide(idx))
	eps := schedulingtest.Endpoints(3)
	res, err := s.Schedule(context.Background(), schedulingtest.Completion("r", "m", strings.Repeat("abc def ", 30)), eps)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Release()
	total := float64(len(idx.reqs[0].GetBlockKeys()))
	if total < 10 {
		t.Fatalf("only %v blocks", total)
	}
	for j, want := range []float64{0, 5 / total, 10 / total} {
		if got := res.Primary.Score(0, j); math.Abs(got-want) > 1e-9 {
			t.Errorf("score of pod-%d = %v, want %v", j, got, want)
		}
	}
	if tg, _ := res.Primary.Target(); tg.Endpoint.Name != "pod-2" {
		t.Errorf("routed to %s", tg.Endpoint.Name)
	}
	if len(res.Effects) != 1 || res.Effects[0].Plugin.Type != preciseprefix.ProducerType || !preciseprefix.Records(res.Effects[0].Plugin.Type) {
		t.Fatalf("effects %+v", res.Effects)
	}
	if _, ok := any(&preciseprefix.Producer{}).(scheduling.Scorer); ok {
		t.Error("the producer scores")
	}
	if preciseprefix.Records("prefix-cache-scorer") {
		t.Error("an approximate scorer's effects are not the indexer's")
	}
}
