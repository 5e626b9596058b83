package preciseprefix_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	indexerv1 "github.com/hermod/hermod/libs/api/hermod/indexer/v1"
	"github.com/hermod/hermod/libs/kv/blockkey"
	"github.com/hermod/hermod/libs/plugins/preciseprefix"
	_ "github.com/hermod/hermod/libs/plugins/standard" // every plugin type
	"github.com/hermod/hermod/libs/scheduling/schedulingtest"
	"github.com/hermod/hermod/libs/tokenizer"
)

// fakeIndexer answers from a table of blocks per endpoint and records the
// requests (the indexer service has its own tests).
type fakeIndexer struct {
	mu     sync.Mutex
	blocks map[string]int
	reqs   []*indexerv1.ScoreRequest
	err    error
}

func (f *fakeIndexer) Score(_ context.Context, req *indexerv1.ScoreRequest) (*indexerv1.ScoreResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reqs = append(f.reqs, req)
	if f.err != nil {
		return nil, f.err
	}
	resp := &indexerv1.ScoreResponse{PromptBlocks: int32(len(req.GetBlockKeys()))}
	for _, c := range req.GetCandidates() {
		n := min(f.blocks[c], len(req.GetBlockKeys()))
		resp.Scores = append(resp.Scores, &indexerv1.EndpointScore{Endpoint: c, Blocks: int32(n), Score: float64(n)})
	}
	return resp, nil
}

const params = `{"indexerConfig": {"tokenizersPoolConfig": {"modelName": "builtin"}}, "tokenProcessorConfig": {"blockSize": 4}}`

func newPlugin(t *testing.T, idx preciseprefix.Indexer, p string) *preciseprefix.Plugin {
	t.Helper()
	h := schedulingtest.NewHandle()
	h.Services = map[string]any{string(preciseprefix.IndexerService): idx}
	return schedulingtest.New[*preciseprefix.Plugin](t, h, preciseprefix.Type, "", p)
}

func TestScoresTheRunMinMax(t *testing.T) {
	idx := &fakeIndexer{blocks: map[string]int{"pod-0": 2, "pod-1": 6, "pod-2": 0, "pod-3": 4}}
	p := newPlugin(t, idx, params)
	prompt := strings.Repeat("the same long system prompt, shared by many users. ", 8)
	req := schedulingtest.Completion("r1", "m", prompt)
	eps := schedulingtest.Endpoints(4)
	cs := schedulingtest.CycleState(1)
	scores := schedulingtest.Score(p, cs, req, eps)
	// holders 2, 6, 4 -> min-max 0, 1, 0.5; pod-2 holds nothing -> 0
	if want := []float64{0, 1, 0, 0.5}; !equal(scores, want) {
		t.Fatalf("scores %v, want %v", scores, want)
	}
	// the indexer was asked once, with the keys of the built-in tokens
	m := p.MatchPrefix(context.Background(), cs, req, eps)
	if len(idx.reqs) != 1 || m.MatchedBlocks("pod-1") != 6 || !m.Hit() {
		t.Fatalf("%d indexer calls, match %v", len(idx.reqs), m.Matched())
	}
	keyer, _ := blockkey.New(4, 0)
	want := keyer.Prompt(nil, "m", tokenizer.Builtin{}.Encode(nil, prompt))
	got := idx.reqs[0].GetBlockKeys()
	if len(got) != len(want) || blockkey.Key(got[0]) != want[0] || m.TotalBlocks != len(want) || idx.reqs[0].GetModel() != "m" {
		t.Fatalf("keys sent %d (first %x), want %d (first %x)", len(got), got[0], len(want), want[0])
	}
	// all holders alike -> 1.0 each
	idx.blocks = map[string]int{"pod-0": 3, "pod-1": 3}
	if s := schedulingtest.Score(p, schedulingtest.CycleState(1), req, eps); !equal(s, []float64{1, 1, 0, 0}) {
		t.Fatalf("equal holders scored %v", s)
	}
}

func TestChatPromptsAreRenderedAndAdaptersChainFromTheAdapter(t *testing.T) {
	idx := &fakeIndexer{}
	p := newPlugin(t, idx, params)
	req := schedulingtest.Chat("r1", "sql-lora", "You are terse.", "count the rows of every table in the database, please")
	req.Adapter = "sql-lora"
	schedulingtest.Score(p, schedulingtest.CycleState(1), req, schedulingtest.Endpoints(2))
	rendered := tokenizer.Llama3Template{}.Apply([]tokenizer.Message{{Role: req.Body.Messages[0].Role, Content: req.Body.Messages[0].Content}, {Role: req.Body.Messages[1].Role, Content: req.Body.Messages[1].Content}}, true)
	keyer, _ := blockkey.New(4, 0)
	want := keyer.Prompt(nil, "sql-lora", tokenizer.Builtin{}.Encode(nil, rendered))
	if got := idx.reqs[0].GetBlockKeys(); len(got) != len(want) || blockkey.Key(got[len(got)-1]) != want[len(want)-1] || idx.reqs[0].GetLoraName() != "sql-lora" {
		t.Fatalf("chat keys %d, want %d; lora %q", len(got), len(want), idx.reqs[0].GetLoraName())
	}
}

func TestFailsOpenWhenTheIndexerFails(t *testing.T) {
	idx := &fakeIndexer{err: errors.New("unavailable")}
	h := schedulingtest.NewHandle()
	h.Services = map[string]any{string(preciseprefix.IndexerService): idx}
	p := schedulingtest.New[*preciseprefix.Plugin](t, h, preciseprefix.Type, "", params)
	scores := schedulingtest.Score(p, schedulingtest.CycleState(1), schedulingtest.Completion("r", "m", strings.Repeat("words ", 40)), schedulingtest.Endpoints(3))
	if !equal(scores, []float64{0, 0, 0}) {
		t.Fatalf("fail-open scores %v", scores)
	}
	// The plugin's metrics are in the handle's registry.
	if got := testutil.ToFloat64(gathered(t, h, "hermod_picker_indexer_fail_open_total")); got != 1 {
		t.Fatalf("fail-open counter %v, want 1", got)
	}
}

// modelTokenizers answers the builtin tokenizer for model "m" and none for
// any other, counting what it is asked.
type modelTokenizers struct {
	mu    sync.Mutex
	asked map[string]int
}

func (m *modelTokenizers) Tokenizer(cfg preciseprefix.TokenizersPoolConfig) (tokenizer.Tokenizer, tokenizer.ChatTemplate, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.asked[cfg.ModelName]++
	if cfg.ModelName != "m" {
		return nil, nil, errors.New("no tokenizer for " + cfg.ModelName)
	}
	return tokenizer.Builtin{}, tokenizer.Llama3Template{}, nil
}

// Without tokenizersPoolConfig.modelName (upstream allows it), each
// request's model selects the tokenizer, loaded once per model; a model
// without one matches no blocks, and the indexer is not asked.
func TestTokenizerOfTheRequestsModelWithoutModelName(t *testing.T) {
	idx := &fakeIndexer{blocks: map[string]int{"pod-1": 3}}
	toks := &modelTokenizers{asked: map[string]int{}}
	h := schedulingtest.NewHandle()
	h.Services = map[string]any{string(preciseprefix.IndexerService): idx, string(preciseprefix.TokenizerService): preciseprefix.Tokenizers(toks)}
	p := schedulingtest.New[*preciseprefix.Plugin](t, h, preciseprefix.Type, "", `{"tokenProcessorConfig": {"blockSize": 4}}`)
	if len(h.Warnings) != 1 || !strings.Contains(h.Warnings[0], "each request's model") {
		t.Fatalf("warnings = %q", h.Warnings)
	}
	prompt := strings.Repeat("a prompt long enough for some blocks. ", 4)
	eps := schedulingtest.Endpoints(2)
	for i := range 2 {
		scores := schedulingtest.Score(p, schedulingtest.CycleState(1), schedulingtest.Completion("r", "m", prompt), eps)
		if !equal(scores, []float64{0, 1}) {
			t.Fatalf("request %d of model m: scores %v, want [0 1]", i, scores)
		}
		scores = schedulingtest.Score(p, schedulingtest.CycleState(1), schedulingtest.Completion("r", "unknown", prompt), eps)
		if !equal(scores, []float64{0, 0}) {
			t.Fatalf("request %d of a model without a tokenizer: scores %v, want [0 0]", i, scores)
		}
	}
	if len(idx.reqs) != 2 || toks.asked["m"] != 1 || toks.asked["unknown"] != 1 {
		t.Fatalf("indexer asked %d times (want 2), tokenizers asked %v (want once each)", len(idx.reqs), toks.asked)
	}
}

func TestParameters(t *testing.T) {
	idx := &fakeIndexer{}
	for _, c := range []struct{ params, field string }{
		{`{"indexerConfig": {"tokenizersPoolConfig": {"modelName": "builtin"}}, "tokenProcessorConfig": {"blockSize": 0}}`, "tokenProcessorConfig.blockSize"},
		{`{"indexerConfig": {"tokenizersPoolConfig": {"modelName": "builtin"}}, "speculativeTTL": "soon"}`, "speculativeTTL"},
		{`{"indexerConfig": {"tokenizersPoolConfig": {"modelName": "meta-llama/Llama-3.1-8B-Instruct"}}}`, "indexerConfig.tokenizersPoolConfig"},
	} {
		h := schedulingtest.NewHandle()
		h.Services = map[string]any{string(preciseprefix.IndexerService): idx}
		_, err := schedulingtest.NewErr(h, preciseprefix.Type, "", c.params)
		if err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: err = %v, want it to name %s", c.params, err, c.field)
		}
	}
	// reference/001's full shape loads; the indexer-side parts warn
	h := schedulingtest.NewHandle()
	h.Services = map[string]any{string(preciseprefix.IndexerService): idx}
	_, err := schedulingtest.NewErr(h, preciseprefix.Type, "", `{"tokenProcessorConfig": {"blockSize": 16}, "indexerConfig": {"kvBlockIndexConfig": {"inMemoryConfig": {"size": 100000000, "podCacheSize": 10}}, "tokenizersPoolConfig": {"modelName": "builtin", "workersCount": 5, "hf": {"enabled": true}}}, "kvEventsConfig": {"zmqEndpoint": "tcp://indexer:5557", "topicFilter": "kv@"}, "speculativeIndexing": false, "speculativeTTL": "2s"}`)
	if err != nil || len(h.Warnings) == 0 {
		t.Fatalf("reference/001 shape: %v, warnings %v", err, h.Warnings)
	}
	// no indexer service: a clear error
	if _, err := schedulingtest.NewErr(schedulingtest.NewHandle(), preciseprefix.Type, "", params); err == nil || !strings.Contains(err.Error(), "--indexer-address") {
		t.Fatalf("without an indexer: %v", err)
	}
}

// no-hit-lru-scorer reads the precise match: a prompt some pod holds is
// warm (0.5 everywhere).
func TestNoHitLRUReadsThePreciseMatch(t *testing.T) {
	idx := &fakeIndexer{blocks: map[string]int{"pod-1": 2}}
	cfg := `
plugins:
- type: precise-prefix-cache-scorer
  parameters: ` + params + `
- type: no-hit-lru-scorer
  parameters: {prefixPluginType: precise-prefix-cache-scorer, prefixPluginName: precise-prefix-cache-scorer}
- type: max-score-picker
schedulingProfiles:
- name: default
  plugins: [{pluginRef: precise-prefix-cache-scorer}, {pluginRef: no-hit-lru-scorer}, {pluginRef: max-score-picker}]
`
	s := schedulingtest.Scheduler(t, cfg, preciseprefix.IndexerService.Provide(idx))
	res, err := s.Schedule(context.Background(), schedulingtest.Completion("r", "m", strings.Repeat("abc def ", 30)), schedulingtest.Endpoints(3))
	if err != nil {
		t.Fatal(err)
	}
	if tg, _ := res.Primary.Target(); tg.Endpoint.Name != "pod-1" {
		t.Fatalf("routed to %s, want the pod holding the prefix", tg.Endpoint.Name)
	}
}

func equal(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A model's Hugging Face files on local disk: the tokenizer and the chat
// template beside it.
func TestDefaultTokenizersLoadLocalFiles(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "acme", "tiny")
	if err := os.MkdirAll(model, 0o755); err != nil {
		t.Fatal(err)
	}
	tok, err := os.ReadFile("../../tokenizer/hf/testdata/added/tokenizer.json")
	if err != nil {
		t.Fatal(err)
	}
	cfg := `{"chat_template": "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}"}`
	for name, data := range map[string][]byte{"tokenizer.json": tok, "tokenizer_config.json": []byte(cfg)} {
		if err := os.WriteFile(filepath.Join(model, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pool := preciseprefix.TokenizersPoolConfig{ModelName: "acme/tiny", Local: &preciseprefix.LocalTokenizer{AutoDiscoveryDir: dir}}
	tk, tmpl, err := preciseprefix.DefaultTokenizers{}.Tokenizer(pool)
	if err != nil {
		t.Fatal(err)
	}
	if got := tmpl.Apply([]tokenizer.Message{{Role: "user", Content: "hi"}}, true); got != "<user>hi<assistant>" {
		t.Fatalf("template rendered %q", got)
	}
	if ids := tk.Encode(nil, "hello"); len(ids) == 0 {
		t.Fatal("no ids")
	}
	// by the model map, to the directory
	pool = preciseprefix.TokenizersPoolConfig{ModelName: "tiny", Local: &preciseprefix.LocalTokenizer{ModelTokenizerMap: map[string]string{"tiny": model}}}
	if _, _, err := (preciseprefix.DefaultTokenizers{}).Tokenizer(pool); err != nil {
		t.Fatal(err)
	}
	pool = preciseprefix.TokenizersPoolConfig{ModelName: "missing/model", Local: &preciseprefix.LocalTokenizer{AutoDiscoveryDir: dir}}
	if _, _, err := (preciseprefix.DefaultTokenizers{}).Tokenizer(pool); err == nil || !strings.Contains(err.Error(), "missing/model") {
		t.Fatalf("missing files: %v", err)
	}
}

// With speculativeIndexing a decision records its target and the prompt's
// keys, the TTL in milliseconds as the effect's capacity.
func TestSpeculativeIndexingRecordsAnEffect(t *testing.T) {
	idx := &fakeIndexer{blocks: map[string]int{}}
	cfg := `
plugins:
- type: precise-prefix-cache-scorer
  parameters:
    speculativeIndexing: true
    speculativeTTL: 3s
    indexerConfig: {tokenizersPoolConfig: {modelName: builtin}}
    tokenProcessorConfig: {blockSize: 4}
- type: max-score-picker
`
	s := schedulingtest.Scheduler(t, cfg, preciseprefix.IndexerService.Provide(idx))
	res, err := s.Schedule(context.Background(), schedulingtest.Completion("r", "m", strings.Repeat("abc def ", 30)), schedulingtest.Endpoints(3))
	if err != nil {
		t.Fatal(err)
	}
	tg, _ := res.Primary.Target()
	if len(res.Effects) != 1 {
		t.Fatalf("effects %+v", res.Effects)
	}
	e := res.Effects[0]
	if e.Plugin.Type != preciseprefix.Type || len(e.Endpoints) != 1 || e.Endpoints[0] != tg.Endpoint.Name || e.Capacity != 3000 || len(e.Blocks) != len(idx.reqs[0].GetBlockKeys()) || e.Blocks[0] != idx.reqs[0].GetBlockKeys()[0] {
		t.Fatalf("effect %+v", e)
	}
}

// gathered is the collector registered under name in the handle's
// registry.
func gathered(t *testing.T, h *schedulingtest.Handle, name string) prometheus.Collector {
	t.Helper()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: "Scoring cycles in which precise-prefix-cache-scorer got no answer from the indexer and scored every endpoint alike."})
	var taken prometheus.AlreadyRegisteredError
	if err := h.Metrics.Register(c); !errors.As(err, &taken) {
		t.Fatalf("%s is not registered (%v)", name, err)
	}
	return taken.ExistingCollector
}

// During an indexer outage the plugin logs the first failure, not one line
// per request, and one Info line when the indexer answers again.
func TestIndexerOutageIsLoggedOncePerInterval(t *testing.T) {
	idx := &fakeIndexer{err: errors.New("unavailable")}
	var buf lockedBuffer
	h := schedulingtest.NewHandle()
	h.Log = slog.New(slog.NewJSONHandler(&buf, nil))
	h.Services = map[string]any{string(preciseprefix.IndexerService): idx}
	p := schedulingtest.New[*preciseprefix.Plugin](t, h, preciseprefix.Type, "", params)
	req := schedulingtest.Completion("r", "m", strings.Repeat("words ", 40))
	eps := schedulingtest.Endpoints(3)
	for range 199 {
		schedulingtest.Score(p, schedulingtest.CycleState(1), req, eps)
	}
	idx.mu.Lock()
	idx.err = nil
	idx.mu.Unlock()
	for range 3 {
		schedulingtest.Score(p, schedulingtest.CycleState(1), req, eps)
	}
	var warns, infos []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		if !strings.Contains(m["msg"].(string), "indexer") {
			continue
		}
		switch m["level"] {
		case "WARN":
			warns = append(warns, m)
		case "INFO":
			infos = append(infos, m)
		}
	}
	if len(warns) != 1 || warns[0]["request_id"] != "r" || warns[0]["error"] != "unavailable" {
		t.Fatalf("%d indexer warnings for 199 failures in one interval, want 1: %v", len(warns), warns)
	}
	if len(infos) != 1 || infos[0]["failures"] != 199.0 {
		t.Fatalf("recovery lines %v, want one counting 199 failures", infos)
	}
	if got := testutil.ToFloat64(gathered(t, h, "hermod_picker_indexer_fail_open_total")); got != 199 {
		t.Fatalf("fail-open counter %v, want 199 (every failure counts)", got)
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
