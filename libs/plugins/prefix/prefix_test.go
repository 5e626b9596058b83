package prefix_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"strings"
	"testing"

	_ "github.com/hermod/hermod/libs/plugins/picker"
	"github.com/hermod/hermod/libs/plugins/prefix"
	_ "github.com/hermod/hermod/libs/plugins/profilehandler"
	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/libs/scheduling/schedulingtest"
)

// defaultBlockChars is the default block size in characters (16 tokens x 4).
const defaultBlockChars = 64

// prompt returns n default-sized blocks, block i starting with "tag i".
func prompt(tag string, n int) string { return string(text(tag, n, defaultBlockChars)) }

func newPlugin(t *testing.T, params string) *prefix.Plugin {
	t.Helper()
	return schedulingtest.New[*prefix.Plugin](t, schedulingtest.NewHandle(), prefix.Type, "", params)
}

// route runs a full cycle for req (score, then pre-request with primary
// and optional prefill targets) and releases the cycle state.
func route(t *testing.T, p *prefix.Plugin, req *scheduling.Request, eps []*scheduling.Endpoint, primary, prefill *scheduling.Endpoint) {
	t.Helper()
	cs := schedulingtest.CycleState(1)
	schedulingtest.Score(p, cs, req, eps)
	schedulingtest.PreRequest(context.Background(), p, cs, req, result(eps, primary, prefill))
	cs.Reset()
}

func result(eps []*scheduling.Endpoint, primary, prefill *scheduling.Endpoint) *scheduling.Result {
	res := &scheduling.Result{RequestID: "r"}
	res.Primary = &scheduling.ProfileResult{Profile: "decode", Endpoints: eps, Targets: []scheduling.Target{{Endpoint: primary}}}
	res.Profiles = []*scheduling.ProfileResult{res.Primary}
	if prefill != nil {
		res.Prefill = &scheduling.ProfileResult{Profile: "prefill", Endpoints: eps, Targets: []scheduling.Target{{Endpoint: prefill}}}
		res.Profiles = append(res.Profiles, res.Prefill)
	}
	return res
}

func score(p *prefix.Plugin, req *scheduling.Request, eps []*scheduling.Endpoint) []float64 {
	return schedulingtest.Score(p, schedulingtest.CycleState(1), req, eps)
}

func approxEqual(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Abs(a[i]-b[i]) > 1e-9 {
			return false
		}
	}
	return true
}

func matchOf(p *prefix.Plugin, req *scheduling.Request, eps []*scheduling.Endpoint) *scheduling.PrefixMatch {
	return p.MatchPrefix(context.Background(), schedulingtest.CycleState(1), req, eps)
}

func TestDefaults(t *testing.T) {
	p := newPlugin(t, "")
	if got := p.TypedName(); got.Type != "prefix-cache-scorer" || got.Name != "prefix-cache-scorer" {
		t.Errorf("TypedName = %+v", got)
	}
	want := prefix.Params{AutoTune: true, BlockSizeTokens: 16, MaxPrefixBlocksToMatch: 256, LRUCapacityPerServer: 31250}
	if got := p.Parameters(); got != want {
		t.Errorf("Parameters = %+v, want %+v", got, want)
	}
	var _ scheduling.Scorer = p
	var _ scheduling.PreRequest = p
	var _ scheduling.PrefixMatcher = p
}

func TestParams(t *testing.T) {
	h := schedulingtest.NewHandle()
	p := schedulingtest.New[*prefix.Plugin](t, h, prefix.Type, "px",
		`{"autoTune": false, "blockSizeTokens": 8, "maxPrefixBlocksToMatch": 32, "lruCapacityPerServer": 1000}`)
	want := prefix.Params{AutoTune: false, BlockSizeTokens: 8, MaxPrefixBlocksToMatch: 32, LRUCapacityPerServer: 1000}
	if got := p.Parameters(); got != want {
		t.Errorf("Parameters = %+v, want %+v", got, want)
	}
	if len(h.Warnings) != 0 {
		t.Errorf("unexpected warnings %q", h.Warnings)
	}

	// blockSize together with blockSizeTokens: a deprecation warning.
	h = schedulingtest.NewHandle()
	p = schedulingtest.New[*prefix.Plugin](t, h, prefix.Type, "", `{"blockSize": 64, "blockSizeTokens": 32}`)
	if got := p.Parameters().(prefix.Params).BlockSizeTokens; got != 32 {
		t.Errorf("BlockSizeTokens = %d, want 32", got)
	}
	if len(h.Warnings) != 1 || !strings.Contains(h.Warnings[0], "blockSize") || !strings.Contains(h.Warnings[0], "deprecated") {
		t.Errorf("warnings = %q, want one about the deprecated blockSize", h.Warnings)
	}
}

func TestParamErrors(t *testing.T) {
	cases := []struct{ params, path string }{
		{`{"blockSize": 64}`, "parameters.blockSize"},
		{`{"blockSize": 64, "autoTune": false}`, "parameters.blockSize"},
		{`{"blockSizeTokens": 0}`, "parameters.blockSizeTokens"},
		{`{"blockSizeTokens": -16}`, "parameters.blockSizeTokens"},
		{`{"blockSizeTokens": "16"}`, "parameters.blockSizeTokens"},
		{`{"maxPrefixBlocksToMatch": 0}`, "parameters.maxPrefixBlocksToMatch"},
		{`{"lruCapacityPerServer": 0}`, "parameters.lruCapacityPerServer"},
		{`{"autoTune": "yes"}`, "parameters.autoTune"},
	}
	for _, c := range cases {
		_, err := schedulingtest.NewErr(schedulingtest.NewHandle(), prefix.Type, "", c.params)
		if err == nil {
			t.Errorf("%s: no error", c.params)
			continue
		}
		var pe *scheduling.ParamError
		if !errors.As(err, &pe) || pe.Path != c.path {
			t.Errorf("%s: error %q (%T) does not name %s", c.params, err, err, c.path)
		}
	}
	_, err := schedulingtest.NewErr(schedulingtest.NewHandle(), prefix.Type, "", `{"blockSize": 64}`)
	if err != nil && !strings.Contains(err.Error(), "blockSizeTokens") {
		t.Errorf("blockSize error %q does not point to blockSizeTokens", err)
	}
}

func TestScoreConsecutiveBlocks(t *testing.T) {
	p := newPlugin(t, "")
	eps := schedulingtest.Endpoints(4)
	a := prompt("a", 10)
	route(t, p, schedulingtest.Completion("1", "m", a), eps, eps[1], nil)

	half := a[:5*defaultBlockChars] + prompt("b", 5)
	cases := []struct {
		name   string
		prompt string
		want   []float64
	}{
		{"same prompt", a, []float64{0, 1, 0, 0}},
		{"first 5 of 10 blocks shared", half, []float64{0, 0.5, 0, 0}},
		{"prefix of the routed prompt", a[:5*defaultBlockChars], []float64{0, 1, 0, 0}},
		{"routed prompt plus 10 blocks", a + prompt("c", 10), []float64{0, 0.5, 0, 0}},
		{"trailing partial block ignored", a + "tail", []float64{0, 1, 0, 0}},
		{"partial first block", a[:defaultBlockChars-1], []float64{0, 0, 0, 0}},
		{"first block differs", "X" + a[1:], []float64{0, 0, 0, 0}},
		{"unrelated", prompt("z", 10), []float64{0, 0, 0, 0}},
	}
	for _, c := range cases {
		if got := score(p, schedulingtest.Completion("2", "m", c.prompt), eps); !approxEqual(got, c.want) {
			t.Errorf("%s: scores %v, want %v", c.name, got, c.want)
		}
	}

	m := matchOf(p, schedulingtest.Completion("3", "m", half), eps)
	if m.TotalBlocks != 10 || m.BlockSizeTokens != 16 || !maps.Equal(m.Matched(), map[string]int{"pod-1": 5}) || !m.Hit() {
		t.Errorf("match = %+v", m)
	}
	if got := m.CachedTokens("pod-1"); got != 80 {
		t.Errorf("CachedTokens(pod-1) = %d, want 80", got)
	}
	if got := m.MatchedBlocks("pod-0"); got != 0 {
		t.Errorf("MatchedBlocks(pod-0) = %d", got)
	}

	// Several endpoints holding different lengths of the prefix.
	route(t, p, schedulingtest.Completion("4", "m", half), eps, eps[2], nil)
	if got := score(p, schedulingtest.Completion("5", "m", a), eps); !approxEqual(got, []float64{0, 1, 0.5, 0}) {
		t.Errorf("two holders: scores %v, want [0 1 0.5 0]", got)
	}
}

func TestShortRequest(t *testing.T) {
	p := newPlugin(t, "")
	eps := schedulingtest.Endpoints(3)
	short := schedulingtest.Completion("1", "m", strings.Repeat("s", defaultBlockChars-1))
	route(t, p, short, eps, eps[0], nil)
	if got := score(p, short, eps); !approxEqual(got, []float64{0, 0, 0}) {
		t.Errorf("scores %v, want zeros", got)
	}
	m := matchOf(p, short, eps)
	if m.TotalBlocks != 0 || m.Hit() || m.Len() != 0 {
		t.Errorf("match = %+v, want no blocks", m)
	}
	if got := p.Index().Blocks("pod-0"); got != 0 {
		t.Errorf("a short request recorded %d blocks", got)
	}
	empty := schedulingtest.Completion("2", "m", "")
	if got := score(p, empty, eps); !approxEqual(got, []float64{0, 0, 0}) {
		t.Errorf("empty prompt: scores %v", got)
	}
}

func TestModelSeedsHashes(t *testing.T) {
	p := newPlugin(t, "")
	eps := schedulingtest.Endpoints(2)
	a := prompt("a", 4)
	route(t, p, schedulingtest.Completion("1", "model-a", a), eps, eps[0], nil)
	if got := score(p, schedulingtest.Completion("2", "model-b", a), eps); !approxEqual(got, []float64{0, 0}) {
		t.Errorf("other model: scores %v, want zeros", got)
	}
	if got := score(p, schedulingtest.Completion("3", "model-a", a), eps); !approxEqual(got, []float64{1, 0}) {
		t.Errorf("same model: scores %v, want [1 0]", got)
	}
}

func TestChatHashesMessagesJSON(t *testing.T) {
	p := newPlugin(t, "")
	eps := schedulingtest.Endpoints(3)
	sys := "You are a helpful assistant. " + strings.Repeat("Answer briefly and precisely. ", 6)
	first := "What is the capital of France? Please explain the history of the city in detail."
	chat := schedulingtest.Chat("1", "m", sys, "Sure, ask away.", first)
	route(t, p, chat, eps, eps[1], nil)

	type msg struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}
	raw, err := json.Marshal([]msg{{"user", sys}, {"assistant", "Sure, ask away."}, {"user", first}})
	if err != nil {
		t.Fatal(err)
	}
	if got := score(p, schedulingtest.Completion("2", "m", string(raw)), eps); !approxEqual(got, []float64{0, 1, 0}) {
		t.Errorf("completion of the messages' JSON: scores %v, want [0 1 0]", got)
	}
	m := matchOf(p, chat, eps)
	if m.TotalBlocks != len(raw)/defaultBlockChars {
		t.Errorf("TotalBlocks = %d, want %d (JSON of %d bytes)", m.TotalBlocks, len(raw)/defaultBlockChars, len(raw))
	}

	// A continuation of the conversation shares a prefix.
	cont := schedulingtest.Chat("3", "m", sys, "Sure, ask away.", first, "Paris.", "And Germany?")
	got := score(p, cont, eps)
	if got[0] != 0 || got[2] != 0 || got[1] <= 0.5 || got[1] >= 1 {
		t.Errorf("continuation: scores %v, want pod-1 in (0.5, 1)", got)
	}
	// A different system prompt does not.
	other := schedulingtest.Chat("4", "m", "Be terse. "+sys, "Sure, ask away.", first)
	if got := score(p, other, eps); !approxEqual(got, []float64{0, 0, 0}) {
		t.Errorf("other system prompt: scores %v, want zeros", got)
	}
	// The bare text of the messages is not what a chat request hashes.
	plain := schedulingtest.Completion("5", "m", sys+first)
	route(t, p, plain, eps, eps[2], nil)
	if got := score(p, schedulingtest.Chat("6", "m", sys+first), eps); got[2] != 0 {
		t.Errorf("chat matched a completion of its bare content: scores %v", got)
	}
}

func TestAutoTune(t *testing.T) {
	withMetrics := func(blockSize, gpuBlocks int) []*scheduling.Endpoint {
		eps := schedulingtest.Endpoints(3)
		for _, e := range eps {
			e.Metrics.BlockSize, e.Metrics.NumGPUBlocks = blockSize, gpuBlocks
		}
		return eps
	}
	a := string(text("a", 10, 128)) // 10 blocks of 32 tokens, 20 of 16

	t.Run("block size and capacity from metrics", func(t *testing.T) {
		p := newPlugin(t, "")
		eps := withMetrics(32, 3)
		req := schedulingtest.Completion("1", "m", a)
		m := matchOf(p, req, eps)
		if m.BlockSizeTokens != 32 || m.TotalBlocks != 10 {
			t.Errorf("match block size %d, total %d; want 32, 10", m.BlockSizeTokens, m.TotalBlocks)
		}
		route(t, p, req, eps, eps[1], nil)
		if got := p.Index().Blocks("pod-1"); got != 3 {
			t.Errorf("Blocks(pod-1) = %d, want 3 (num_gpu_blocks)", got)
		}
		if got := score(p, req, eps); !approxEqual(got, []float64{0, 0.3, 0}) {
			t.Errorf("scores %v, want [0 0.3 0]", got)
		}
	})
	t.Run("first candidate reporting a block size", func(t *testing.T) {
		p := newPlugin(t, "")
		eps := schedulingtest.Endpoints(3)
		eps[0].Metrics = nil
		eps[1].Metrics.BlockSize = 8
		eps[2].Metrics.BlockSize = 64
		if m := matchOf(p, schedulingtest.Completion("1", "m", a), eps); m.BlockSizeTokens != 8 || m.TotalBlocks != 40 {
			t.Errorf("block size %d, total %d; want 8, 40", m.BlockSizeTokens, m.TotalBlocks)
		}
	})
	t.Run("no metrics", func(t *testing.T) {
		p := newPlugin(t, "")
		eps := schedulingtest.Endpoints(2)
		eps[0].Metrics = nil
		req := schedulingtest.Completion("1", "m", a)
		if m := matchOf(p, req, eps); m.BlockSizeTokens != 16 || m.TotalBlocks != 20 {
			t.Errorf("block size %d, total %d; want 16, 20", m.BlockSizeTokens, m.TotalBlocks)
		}
		route(t, p, req, eps, eps[0], nil)
		if got := p.Index().Blocks("pod-0"); got != 20 {
			t.Errorf("Blocks = %d, want 20", got)
		}
	})
	t.Run("disabled", func(t *testing.T) {
		p := newPlugin(t, `{"autoTune": false, "blockSizeTokens": 4, "lruCapacityPerServer": 5}`)
		eps := withMetrics(32, 3)
		req := schedulingtest.Completion("1", "m", a)
		if m := matchOf(p, req, eps); m.BlockSizeTokens != 4 || m.TotalBlocks != 80 {
			t.Errorf("block size %d, total %d; want 4, 80", m.BlockSizeTokens, m.TotalBlocks)
		}
		route(t, p, req, eps, eps[0], nil)
		if got := p.Index().Blocks("pod-0"); got != 5 {
			t.Errorf("Blocks = %d, want 5 (lruCapacityPerServer)", got)
		}
	})
}

func TestMaxPrefixBlocksToMatch(t *testing.T) {
	p := newPlugin(t, `{"maxPrefixBlocksToMatch": 4}`)
	eps := schedulingtest.Endpoints(2)
	a := prompt("a", 10)
	req := schedulingtest.Completion("1", "m", a)
	if m := matchOf(p, req, eps); m.TotalBlocks != 4 {
		t.Errorf("TotalBlocks = %d, want 4", m.TotalBlocks)
	}
	route(t, p, req, eps, eps[0], nil)
	if got := p.Index().Blocks("pod-0"); got != 4 {
		t.Errorf("Blocks = %d, want 4", got)
	}
	half := a[:2*defaultBlockChars] + prompt("b", 8)
	if got := score(p, schedulingtest.Completion("2", "m", half), eps); !approxEqual(got, []float64{0.5, 0}) {
		t.Errorf("scores %v, want [0.5 0]", got)
	}
}

func TestPreRequestRecordsPrimaryAndPrefill(t *testing.T) {
	p := newPlugin(t, "")
	eps := schedulingtest.Endpoints(4)
	eps[2].Metrics.NumGPUBlocks = 2 // the prefill pod's own capacity
	req := schedulingtest.Completion("1", "m", prompt("a", 6))
	cs := schedulingtest.CycleState(1)
	res := result(eps, eps[1], eps[2])
	res.Primary.Targets = append(res.Primary.Targets, scheduling.Target{Endpoint: eps[3]}) // fallback
	schedulingtest.PreRequest(context.Background(), p, cs, req, res)
	for i, want := range []int{0, 6, 2, 0} {
		if got := p.Index().Blocks(eps[i].Name); got != want {
			t.Errorf("Blocks(%s) = %d, want %d", eps[i].Name, got, want)
		}
	}
	if got := score(p, req, eps); !approxEqual(got, []float64{0, 1, 2.0 / 6, 0}) {
		t.Errorf("scores %v, want [0 1 1/3 0]", got)
	}
	// A result whose primary picked nothing records nothing.
	none := result(eps, eps[0], nil)
	none.Primary.Targets = nil
	schedulingtest.PreRequest(context.Background(), p, schedulingtest.CycleState(1), schedulingtest.Completion("2", "m", prompt("b", 3)), none)
	if got := p.Index().Blocks("pod-0"); got != 0 {
		t.Errorf("Blocks(pod-0) = %d, want 0", got)
	}
}

func TestMatchComputedOncePerCycle(t *testing.T) {
	p := newPlugin(t, "")
	eps := schedulingtest.Endpoints(3)
	ctx := context.Background()
	a := prompt("a", 4)
	req := schedulingtest.Completion("1", "m", a)
	cs := schedulingtest.CycleState(1)
	m1 := p.MatchPrefix(ctx, cs, req, eps)
	if m1.Hit() {
		t.Fatalf("empty index: %+v", m1)
	}
	v, ok := cs.Read(scheduling.PrefixMatchKey)
	if !ok || v.(*scheduling.PrefixMatch) != m1 {
		t.Errorf("cycle state holds %v under PrefixMatchKey, want the returned match", v)
	}
	// The index changes mid-cycle: the cycle keeps its match.
	p.Index().Add("pod-2", 100, 100, prefix.Hashes("m", []byte(a), defaultBlockChars, 256, nil), scheduling.Stamp{Nanos: 1})
	if m2 := p.MatchPrefix(ctx, cs, req, eps); m2 != m1 || m2.Hit() {
		t.Errorf("second MatchPrefix = %p %+v, want the first %p", m2, m2, m1)
	}
	if got := schedulingtest.Score(p, cs, req, eps); !approxEqual(got, []float64{0, 0, 0}) {
		t.Errorf("Score in the same cycle = %v, want zeros", got)
	}
	// Even for other candidates (the match is per request).
	if m3 := p.MatchPrefix(ctx, cs, req, eps[2:]); m3 != m1 {
		t.Errorf("MatchPrefix with other candidates recomputed the match")
	}
	// A new cycle sees the new block.
	m4 := p.MatchPrefix(ctx, schedulingtest.CycleState(1), req, eps)
	if !maps.Equal(m4.Matched(), map[string]int{"pod-2": 4}) {
		t.Errorf("new cycle: Matched = %v, want pod-2: 4", m4.Matched())
	}

	// Score first, then MatchPrefix: the same match.
	cs2 := schedulingtest.CycleState(2)
	if got := schedulingtest.Score(p, cs2, req, eps); !approxEqual(got, []float64{0, 0, 1}) {
		t.Errorf("scores %v", got)
	}
	v2, _ := cs2.Read(scheduling.PrefixMatchKey)
	if m5 := p.MatchPrefix(ctx, cs2, req, eps); m5 != v2.(*scheduling.PrefixMatch) {
		t.Errorf("MatchPrefix after Score returned another match")
	}
}

// Releasing a cycle returns its match to the pool; the next cycle's match
// must not contain the previous one's entries.
func TestResetDoesNotLeakMatches(t *testing.T) {
	p := newPlugin(t, "")
	ctx := context.Background()
	eps := schedulingtest.Endpoints(4)
	tuned := schedulingtest.Endpoints(4)
	for _, e := range tuned {
		e.Metrics.BlockSize = 32
	}
	a := prompt("a", 8)
	for i := range tuned {
		route(t, p, schedulingtest.Completion("r", "m", a), tuned, tuned[i], nil)
	}
	cs := schedulingtest.CycleState(1)
	for i := range 200 {
		m := p.MatchPrefix(ctx, cs, schedulingtest.Completion("a", "m", a), tuned)
		if m.Len() != 4 || m.BlockSizeTokens != 32 || m.TotalBlocks != 4 {
			t.Fatalf("iteration %d: warm match = %+v", i, m)
		}
		cs.Reset()
		if _, ok := cs.Read(scheduling.PrefixMatchKey); ok {
			t.Fatalf("iteration %d: PrefixMatchKey survived Reset", i)
		}
		b := schedulingtest.Completion("b", "m", prompt(fmt.Sprint("b", i), 3))
		m = p.MatchPrefix(ctx, cs, b, eps)
		if m.Hit() || m.Len() != 0 || m.TotalBlocks != 3 || m.BlockSizeTokens != 16 {
			t.Fatalf("iteration %d: cold match after Reset = %+v", i, m)
		}
		if got := schedulingtest.Score(p, cs, b, eps); !approxEqual(got, []float64{0, 0, 0, 0}) {
			t.Fatalf("iteration %d: cold scores %v", i, got)
		}
		cs.Reset()
		// Short request in a fresh cycle state.
		fresh := schedulingtest.CycleState(uint64(i))
		if m := p.MatchPrefix(ctx, fresh, schedulingtest.Completion("c", "m", "tiny"), eps); m.Hit() || m.TotalBlocks != 0 {
			t.Fatalf("iteration %d: short match = %+v", i, m)
		}
		fresh.Reset()
	}
}

// Through the whole scheduler: a prompt returns to the endpoint that served
// it, and a prompt sharing half of its blocks scores 0.5 there.
func TestSchedulerAffinity(t *testing.T) {
	s := schedulingtest.Scheduler(t, `
apiVersion: inference.networking.x-k8s.io/v1alpha1
kind: EndpointPickerConfig
plugins:
- type: prefix-cache-scorer
- type: max-score-picker
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: prefix-cache-scorer
  - pluginRef: max-score-picker
`)
	ctx := context.Background()
	eps := schedulingtest.Endpoints(4)
	where := map[string]string{}
	var prompts []string
	for i := range 20 {
		pr := prompt(fmt.Sprint("conversation ", i), 10)
		res, err := s.Schedule(ctx, schedulingtest.Completion(fmt.Sprint(i), "m", pr), eps)
		if err != nil {
			t.Fatal(err)
		}
		where[pr] = res.Target().Endpoint.Name
		prompts = append(prompts, pr)
		res.Release()
	}
	for i, pr := range prompts {
		res, err := s.Schedule(ctx, schedulingtest.Completion("again", "m", pr), eps)
		if err != nil {
			t.Fatal(err)
		}
		if got := res.Target().Endpoint.Name; got != where[pr] {
			t.Errorf("prompt %d went to %s, first to %s", i, got, where[pr])
		}
		for j, e := range eps {
			want := 0.0
			if e.Name == where[pr] {
				want = 1
			}
			if got := res.Primary.Score(0, j); got != want {
				t.Errorf("prompt %d: score of %s = %v, want %v", i, e.Name, got, want)
			}
		}
		res.Release()
	}
	half := prompts[3][:5*defaultBlockChars] + prompt("fresh", 5)
	res, err := s.Schedule(ctx, schedulingtest.Completion("half", "m", half), eps)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Target().Endpoint.Name; got != where[prompts[3]] {
		t.Errorf("half-shared prompt went to %s, want %s", got, where[prompts[3]])
	}
	for j, e := range eps {
		if e.Name == where[prompts[3]] {
			if got := res.Primary.Score(0, j); got != 0.5 {
				t.Errorf("half-shared prompt: score %v, want 0.5", got)
			}
		}
	}
	res.Release()
}

// GIE's prefix indexer metrics: the blocks the index holds, and per
// decision the share (and estimated bytes) of the prompt its target held.
func TestIndexerMetrics(t *testing.T) {
	h := schedulingtest.NewHandle()
	p := schedulingtest.New[*prefix.Plugin](t, h, prefix.Type, "", "")
	eps := schedulingtest.Endpoints(2)
	req := schedulingtest.Completion("1", "m", prompt("a", 6))
	schedulingtest.PreRequest(context.Background(), p, schedulingtest.CycleState(1), req, result(eps, eps[0], nil))
	// the same prompt again: its target now holds all 6 blocks
	schedulingtest.PreRequest(context.Background(), p, schedulingtest.CycleState(1), schedulingtest.Completion("2", "m", prompt("a", 6)), result(eps, eps[0], nil))
	mfs, err := h.Metrics.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sums := map[string][2]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if hist := m.GetHistogram(); hist != nil {
				sums[mf.GetName()] = [2]float64{float64(hist.GetSampleCount()), hist.GetSampleSum()}
			} else if g := m.GetGauge(); g != nil {
				sums[mf.GetName()] = [2]float64{1, g.GetValue()}
			}
		}
	}
	if got := sums["inference_extension_prefix_indexer_size"][1]; got != 6 {
		t.Errorf("indexer size %v, want 6", got)
	}
	if got := sums["inference_extension_prefix_indexer_hit_ratio"]; got != [2]float64{2, 1} {
		t.Errorf("hit ratio (count, sum) %v, want (2, 1): a miss then a whole hit", got)
	}
	if got := sums["inference_extension_prefix_indexer_hit_bytes"]; got[0] != 2 || got[1] != float64(6*prefix.DefaultBlockSizeTokens*prefix.CharsPerToken) {
		t.Errorf("hit bytes (count, sum) %v", got)
	}
}
