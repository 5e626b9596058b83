package engine

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/hermod/hermod/libs/kv/events"
	"github.com/hermod/hermod/libs/tokenizer"
)

// recorder is an Observer keeping what it is told.
type recorder struct {
	steps       int
	queries     int
	hits        int
	ttfts       []time.Duration
	pooled      []time.Duration
	gaps        []time.Duration
	preemptions int
	finished    []RequestStats
}

func (r *recorder) Step(int)                          { r.steps++ }
func (r *recorder) PrefixCache(q, h int)              { r.queries += q; r.hits += h }
func (r *recorder) FirstToken(d time.Duration, _ int) { r.ttfts = append(r.ttfts, d) }
func (r *recorder) Pooled(d time.Duration, _ int)     { r.pooled = append(r.pooled, d) }
func (r *recorder) Token(gap time.Duration)           { r.gaps = append(r.gaps, gap) }
func (r *recorder) Preempted()                        { r.preemptions++ }
func (r *recorder) Finished(s RequestStats)           { r.finished = append(r.finished, s) }

// vsim drives a core in virtual time, as fast as the CPU allows.
type vsim struct {
	t      *testing.T
	c      *core
	obs    *recorder
	now    time.Duration
	events []events.Event
}

func newVsim(t *testing.T, cfg Config) *vsim {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	obs := &recorder{}
	return &vsim{t: t, c: newCore(cfg, obs), obs: obs}
}

func (v *vsim) submit(req Request) *Sequence {
	v.t.Helper()
	s, err := v.c.newSequence(req, v.now)
	if err != nil {
		v.t.Fatal(err)
	}
	v.c.add(s)
	return s
}

// step runs one step; false when idle.
func (v *vsim) step() bool {
	d, ok := v.c.plan(v.now)
	if !ok {
		return false
	}
	v.now += d
	for _, e := range v.c.commit(v.now) {
		e.BlockHashes = append([]uint64(nil), e.BlockHashes...)
		v.events = append(v.events, e)
	}
	return true
}

func (v *vsim) runIdle() {
	for i := 0; v.step(); i++ {
		if i > 1_000_000 {
			v.t.Fatal("the engine never went idle")
		}
	}
}

// runUntil steps until simulated time t (or idle).
func (v *vsim) runUntil(t time.Duration) {
	for v.now < t && v.step() {
	}
	v.now = max(v.now, t)
}

func prompt(n int, seed uint64) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = uint32(splitmix64(seed*1_000_003+uint64(i)) % tokenizer.BuiltinVocabSize)
	}
	return out
}

func TestIdleLatencies(t *testing.T) {
	v := newVsim(t, DefaultConfig("m"))
	v.submit(Request{ID: "r", Prompt: prompt(1000, 1), MaxTokens: 50})
	v.runIdle()
	ttft := v.obs.ttfts[0]
	if ttft < 30*time.Millisecond || ttft > 60*time.Millisecond {
		t.Errorf("idle TTFT of a 1k-token prompt = %s, want 30-60 ms", ttft)
	}
	for _, g := range v.obs.gaps {
		if g < 10*time.Millisecond || g > 20*time.Millisecond {
			t.Errorf("idle inter-token latency = %s, want 10-20 ms", g)
			break
		}
	}
	if f := v.obs.finished[0]; f.GenerationTokens != 50 || f.FinishReason != FinishLength || f.Queue != 0 {
		t.Errorf("finished %+v", f)
	}
}

// Inter-token latency grows with the batch.
func TestITLGrowsWithBatch(t *testing.T) {
	itl := func(batch int) time.Duration {
		v := newVsim(t, DefaultConfig("m"))
		for i := range batch {
			v.submit(Request{ID: fmt.Sprint(i), Prompt: prompt(1000, uint64(i)), MaxTokens: 40})
		}
		v.runIdle()
		last := v.obs.gaps[len(v.obs.gaps)-1]
		return last
	}
	one, many := itl(1), itl(32)
	if many <= one || many > 25*time.Millisecond {
		t.Errorf("ITL at batch 1 = %s, at batch 32 = %s: want growth, within 25 ms", one, many)
	}
}

// Requests queued behind others wait: TTFT grows with queue length.
func TestTTFTGrowsWithQueue(t *testing.T) {
	cfg := DefaultConfig("m")
	cfg.MaxNumBatchedTokens = 2048
	v := newVsim(t, cfg)
	for i := range 12 {
		v.submit(Request{ID: fmt.Sprint(i), Prompt: prompt(1000, uint64(i)), MaxTokens: 10})
	}
	v.runIdle()
	if len(v.obs.ttfts) != 12 {
		t.Fatalf("%d first tokens", len(v.obs.ttfts))
	}
	first, last := v.obs.ttfts[0], v.obs.ttfts[11]
	if last < 4*first {
		t.Errorf("TTFT of the 12th queued request %s vs the first %s: want it much larger", last, first)
	}
	for i := 1; i < 12; i++ {
		if v.obs.ttfts[i] < v.obs.ttfts[i-1] {
			t.Errorf("TTFT not monotone in queue position: %v", v.obs.ttfts)
			break
		}
	}
}

// A repeated prompt is served from the prefix cache: cached tokens are
// block-aligned and exclude the last token, and TTFT is shorter.
func TestPrefixCacheHit(t *testing.T) {
	v := newVsim(t, DefaultConfig("m"))
	p := prompt(1000, 7)
	a := v.submit(Request{ID: "a", Prompt: p, MaxTokens: 5})
	v.runIdle()
	b := v.submit(Request{ID: "b", Prompt: p, MaxTokens: 5})
	v.runIdle()
	if got := a.Progress().CachedTokens; got != 0 {
		t.Errorf("first request cached %d tokens", got)
	}
	// 1000 tokens: at most (1000-1)/16 = 62 blocks = 992 tokens hit.
	if got := b.Progress().CachedTokens; got != 992 {
		t.Errorf("repeat cached %d tokens, want 992", got)
	}
	if v.obs.ttfts[1] >= v.obs.ttfts[0]/2 {
		t.Errorf("repeat TTFT %s vs first %s: want much shorter", v.obs.ttfts[1], v.obs.ttfts[0])
	}
	if v.obs.queries != 2000 || v.obs.hits != 992 {
		t.Errorf("prefix cache queries %d hits %d", v.obs.queries, v.obs.hits)
	}
	// A prompt sharing the first 512 tokens hits exactly those blocks.
	c := v.submit(Request{ID: "c", Prompt: append(append([]uint32{}, p[:512]...), prompt(300, 8)...), MaxTokens: 5})
	v.runIdle()
	if got := c.Progress().CachedTokens; got != 512 {
		t.Errorf("shared-prefix request cached %d tokens, want 512", got)
	}
}

// Output blocks are cached too: a follow-up turn that contains the first
// turn's prompt and output hits both.
func TestOutputBlocksAreCached(t *testing.T) {
	v := newVsim(t, DefaultConfig("m"))
	p := prompt(64, 3)
	a := v.submit(Request{ID: "a", Prompt: p, MaxTokens: 40, Seed: 11})
	v.runIdle()
	turn2 := append(append([]uint32{}, p...), (&Sequence{req: Request{Seed: 11, Prompt: p}}).tokens(nil, 64, 104)...)
	turn2 = append(turn2, prompt(20, 4)...)
	b := v.submit(Request{ID: "b", Prompt: turn2, MaxTokens: 5})
	v.runIdle()
	_ = a
	// 64 prompt + 40 output = 104 tokens; KV of the last output token is
	// never computed, so 103 tokens were cached: 6 full blocks.
	if got := b.Progress().CachedTokens; got != 96 {
		t.Errorf("second turn cached %d tokens, want 96", got)
	}
}

// Long prompts are prefilled in chunks of at most max-num-batched-tokens.
func TestChunkedPrefill(t *testing.T) {
	cfg := DefaultConfig("m")
	cfg.MaxNumBatchedTokens = 512
	v := newVsim(t, cfg)
	v.submit(Request{ID: "r", Prompt: prompt(2000, 1), MaxTokens: 1})
	v.runIdle()
	if v.obs.steps != 4 {
		t.Errorf("2000-token prompt in %d steps of 512, want 4", v.obs.steps)
	}
}

// When blocks run out, the newest running sequence is preempted, and every
// request still completes.
func TestPreemption(t *testing.T) {
	cfg := DefaultConfig("m")
	cfg.NumGPUBlocks = 64 // 1024 tokens
	cfg.MaxModelLen = 1024
	v := newVsim(t, cfg)
	var seqs []*Sequence
	for i := range 6 {
		seqs = append(seqs, v.submit(Request{ID: fmt.Sprint(i), Prompt: prompt(100, uint64(i)), MaxTokens: 200}))
	}
	v.runIdle()
	if v.obs.preemptions == 0 {
		t.Error("no preemption although 6 x 300 tokens do not fit in 1024")
	}
	for _, s := range seqs {
		if p := s.Progress(); !p.Done || p.Generated != 200 || p.FinishReason != FinishLength {
			t.Errorf("%s: %+v", s.ID(), p)
		}
	}
	if v.c.pool.usage() != 0 {
		t.Errorf("blocks still held after all requests ended: usage %v", v.c.pool.usage())
	}
}

func TestMaxNumSeqs(t *testing.T) {
	cfg := DefaultConfig("m")
	cfg.MaxNumSeqs = 4
	v := newVsim(t, cfg)
	for i := range 10 {
		v.submit(Request{ID: fmt.Sprint(i), Prompt: prompt(50, uint64(i)), MaxTokens: 20})
	}
	for v.step() {
		if n := len(v.c.running); n > 4 {
			t.Fatalf("%d running, max 4", n)
		}
	}
}

// LoRA adapters load on demand, at most max-loras at once; a request whose
// adapter cannot load waits while others run.
func TestLoRASlots(t *testing.T) {
	cfg := DefaultConfig("m")
	cfg.Adapters = []string{"sql", "chat", "code"}
	cfg.MaxLoRAs = 2
	v := newVsim(t, cfg)
	v.submit(Request{ID: "a", Adapter: "sql", Prompt: prompt(50, 1), MaxTokens: 50})
	v.submit(Request{ID: "b", Adapter: "chat", Prompt: prompt(50, 2), MaxTokens: 50})
	c := v.submit(Request{ID: "c", Adapter: "code", Prompt: prompt(50, 3), MaxTokens: 5})
	d := v.submit(Request{ID: "d", Prompt: prompt(50, 4), MaxTokens: 5})
	v.step()
	running, waiting := v.c.adapters()
	if fmt.Sprint(running) != "[sql chat]" || fmt.Sprint(waiting) != "[code]" {
		t.Errorf("running adapters %v, waiting %v", running, waiting)
	}
	if d.state != stateRunning {
		t.Error("a base-model request waited behind an adapter request")
	}
	v.runIdle()
	if !c.Progress().Done {
		t.Error("the code adapter request never ran")
	}
	if _, err := v.c.newSequence(Request{Adapter: "nope", Prompt: prompt(5, 1)}, 0); err == nil {
		t.Error("unknown adapter accepted")
	}
}

// Blocks are keyed by adapter: the same prompt under another adapter is a
// miss.
func TestLoRAKeysBlocks(t *testing.T) {
	cfg := DefaultConfig("m")
	cfg.Adapters = []string{"sql"}
	v := newVsim(t, cfg)
	p := prompt(200, 9)
	v.submit(Request{ID: "a", Prompt: p, MaxTokens: 1})
	v.runIdle()
	b := v.submit(Request{ID: "b", Adapter: "sql", Prompt: p, MaxTokens: 1})
	v.runIdle()
	if got := b.Progress().CachedTokens; got != 0 {
		t.Errorf("adapter request hit %d base-model tokens", got)
	}
	var stored *events.Event
	for i := range v.events {
		if v.events[i].Kind == events.KindBlockStored && v.events[i].LoRAName == "sql" {
			stored = &v.events[i]
		}
	}
	if stored == nil || stored.LoRAID != 1 || !stored.HasLoRAID {
		t.Errorf("no BlockStored event carrying the adapter: %+v", stored)
	}
}

// A configuration in which one maximum-length sequence does not fit in the
// KV cache is refused (vLLM refuses to start): otherwise a lone request
// could outgrow the pool, preempt itself and never be admitted again.
func TestConfigMustFitOneSequence(t *testing.T) {
	cfg := DefaultConfig("m")
	cfg.NumGPUBlocks = 10
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "do not fit in the KV cache") {
		t.Errorf("validate: %v", err)
	}
	cfg.MaxModelLen = 160
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	// A chat without max_tokens that fits gets an output target that fits.
	v := newVsim(t, cfg)
	s := v.submit(Request{ID: "c", Prompt: prompt(150, 1), Chat: true, Seed: 5})
	v.runIdle()
	if p := s.Progress(); !p.Done || p.Generated != s.Target() {
		t.Errorf("progress %+v", p)
	}
}

// Identical prompts computed at once fill two blocks with the same hash:
// both are stored and evicted with their own events, and the survivor
// still serves hits.
func TestDuplicateHashBlocks(t *testing.T) {
	cfg := DefaultConfig("m")
	cfg.NumGPUBlocks = 40
	cfg.MaxModelLen = 640
	v := newVsim(t, cfg)
	p := prompt(64, 3)
	v.submit(Request{ID: "a", Prompt: p, MaxTokens: 1})
	v.submit(Request{ID: "b", Prompt: p, MaxTokens: 1})
	v.runIdle()
	stored := map[uint64]int{}
	for _, e := range v.events {
		for _, h := range e.BlockHashes {
			stored[h]++
		}
	}
	for h, n := range v.c.pool.cachedHashes() {
		if n != 2 || stored[h] != 2 {
			t.Fatalf("hash %d: %d copies, %d BlockStored", h, n, stored[h])
		}
	}
	// A third identical prompt hits the cache.
	c := v.submit(Request{ID: "c", Prompt: p, MaxTokens: 1})
	v.runIdle()
	if got := c.Progress().CachedTokens; got != 48 {
		t.Errorf("cached %d tokens, want 48", got)
	}
}

// The text of the output tokenizes back to the output tokens, so a
// conversation's next turn hits the blocks its reply filled.
func TestOutputTextRoundTrip(t *testing.T) {
	for seed := range uint64(50) {
		var text []byte
		var want []uint32
		for i := range 40 {
			text = AppendOutputText(text, seed, i)
			want = append(want, OutputToken(seed, i))
		}
		if got := (tokenizer.Builtin{}).Encode(nil, string(text)); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("seed %d: %q tokenizes to %v, output tokens %v", seed, text, got, want)
		}
	}
}

// A multi-turn chat: the second turn, rendered with the reply as text,
// hits the cached prompt and reply of the first.
func TestMultiTurnHitsReply(t *testing.T) {
	v := newVsim(t, DefaultConfig("m"))
	tmpl := tokenizer.Llama3Template{}
	msgs := []tokenizer.Message{{Role: "user", Content: strings.Repeat("Explain prefix caching to me. ", 10)}}
	turn1 := (tokenizer.Builtin{}).Encode(nil, tmpl.Apply(msgs, true))
	a := v.submit(Request{ID: "t1", Prompt: turn1, MaxTokens: 64, Seed: 9, Chat: true})
	v.runIdle()
	var reply []byte
	for i := range a.Progress().Generated {
		reply = AppendOutputText(reply, 9, i)
	}
	msgs = append(msgs, tokenizer.Message{Role: "assistant", Content: string(reply)}, tokenizer.Message{Role: "user", Content: "And routing?"})
	turn2 := (tokenizer.Builtin{}).Encode(nil, tmpl.Apply(msgs, true))
	b := v.submit(Request{ID: "t2", Prompt: turn2, MaxTokens: 4, Chat: true})
	v.runIdle()
	// turn 1's prompt and its 63 reply tokens with KV are cached
	want := (len(turn1) + 63) / 16 * 16
	if got := b.Progress().CachedTokens; got != want {
		t.Errorf("second turn cached %d tokens, want %d (prompt %d + reply)", got, want, len(turn1))
	}
}

func TestRequestValidation(t *testing.T) {
	cfg := DefaultConfig("m")
	cfg.MaxModelLen = 100
	c := newCore(cfg, &recorder{})
	for _, req := range []Request{
		{Prompt: nil},
		{Prompt: prompt(100, 1)},
		{Prompt: prompt(50, 1), MaxTokens: 51},
		{Prompt: prompt(5, 1), MaxTokens: -1},
	} {
		if _, err := c.newSequence(req, 0); err == nil {
			t.Errorf("accepted %d-token prompt with max_tokens %d", len(req.Prompt), req.MaxTokens)
		}
	}
	s, err := c.newSequence(Request{Prompt: prompt(95, 1)}, 0)
	if err != nil || s.Target() != 5 {
		t.Errorf("completions default output: %v, target %d (want min(16, room 5))", err, s.Target())
	}
	chat, _ := c.newSequence(Request{Prompt: prompt(10, 1), Chat: true, Seed: 3}, 0)
	if chat.Target() < 1 || chat.Target() > 90 || chat.finishReason != FinishStop {
		t.Errorf("chat default output: target %d, reason %s", chat.Target(), chat.finishReason)
	}
}

// A pooling request is prefilled (in chunks, from the prefix cache, as any
// prompt) and finishes there with "stop", generating nothing; its whole
// context may be prompt.
func TestPooling(t *testing.T) {
	cfg := DefaultConfig("m")
	cfg.MaxNumBatchedTokens = 512
	cfg.MaxModelLen = 2000
	v := newVsim(t, cfg)
	p := prompt(2000, 9)
	a := v.submit(Request{ID: "a", Prompt: p, Pooling: true})
	v.runIdle()
	pr := a.Progress()
	if !pr.Done || pr.Generated != 0 || pr.FinishReason != FinishStop || pr.PromptTokens != 2000 || pr.TTFT <= 0 {
		t.Errorf("pooled: %+v", pr)
	}
	if v.obs.steps != 4 || len(v.obs.pooled) != 1 || len(v.obs.ttfts) != 0 || len(v.obs.gaps) != 0 {
		t.Errorf("%d steps (want 4 chunks of 512), pooled %v, ttfts %v, gaps %v", v.obs.steps, v.obs.pooled, v.obs.ttfts, v.obs.gaps)
	}
	f := v.obs.finished[0]
	if f.GenerationTokens != 0 || f.PromptTokens != 2000 || f.FinishReason != FinishStop || f.Decode != 0 || f.Prefill <= 0 {
		t.Errorf("finished %+v", f)
	}
	if v.c.pool.usage() != 0 {
		t.Errorf("blocks held after the request ended: usage %v", v.c.pool.usage())
	}
	// the same input again hits the blocks the first one cached
	b := v.submit(Request{ID: "b", Prompt: p, Pooling: true})
	v.runIdle()
	if got := b.Progress().CachedTokens; got != 1984 { // (2000-1)/16 blocks
		t.Errorf("repeat cached %d tokens, want 1984", got)
	}
	c := newCore(cfg, &recorder{})
	for _, req := range []Request{
		{Pooling: true},
		{Pooling: true, Prompt: prompt(2001, 1)},
		{Pooling: true, Prompt: prompt(5, 1), MaxTokens: 1},
		{Pooling: true, Prompt: prompt(5, 1), Adapter: "nope"},
	} {
		if _, err := c.newSequence(req, 0); err == nil {
			t.Errorf("accepted pooling request %+v", req)
		}
	}
}

// After any sequence of requests, the blocks reported stored minus those
// reported removed are exactly the pool's cached blocks.
func TestEventsTrackCachedBlocks(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 1))
		cfg := DefaultConfig("m")
		cfg.NumGPUBlocks = 48 + rng.IntN(200)
		cfg.MaxModelLen = cfg.NumGPUBlocks * cfg.BlockSize
		cfg.MaxNumBatchedTokens = 128 + rng.IntN(512)
		cfg.Adapters = []string{"x"}
		v := newVsim(t, cfg)
		prefixes := [][]uint32{prompt(64, seed), prompt(128, seed+100), prompt(40, seed+200)}
		for i := range 150 {
			p := append(append([]uint32{}, prefixes[rng.IntN(3)]...), prompt(rng.IntN(120)+1, uint64(i)+seed*1000)...)
			req := Request{ID: fmt.Sprint(i), Prompt: p, MaxTokens: 1 + rng.IntN(60), Seed: rng.Uint64()}
			if rng.IntN(5) == 0 {
				req.Adapter = "x"
			}
			s := v.submit(req)
			if rng.IntN(10) == 0 {
				v.c.abort(s)
			}
			v.runUntil(v.now + time.Duration(rng.IntN(40))*time.Millisecond)
		}
		v.runIdle()
		// As in vLLM, every physical block is stored and evicted on its own:
		// count blocks per hash.
		model := map[uint64]int{}
		known := map[uint64]bool{}
		for _, e := range v.events {
			switch e.Kind {
			case events.KindBlockStored:
				if e.HasParent && !known[e.ParentHash] {
					t.Fatalf("seed %d: BlockStored with a parent never stored", seed)
				}
				for _, h := range e.BlockHashes {
					model[h]++
					known[h] = true
				}
			case events.KindBlockRemoved:
				for _, h := range e.BlockHashes {
					if model[h] == 0 {
						t.Fatalf("seed %d: block %d removed but not stored", seed, h)
					}
					if model[h]--; model[h] == 0 {
						delete(model, h)
					}
				}
			case events.KindAllBlocksCleared:
				clear(model)
			}
		}
		cached := v.c.pool.cachedHashes()
		if len(model) != len(cached) {
			t.Fatalf("seed %d: events say %d hashes cached, the pool has %d", seed, len(model), len(cached))
		}
		for h, n := range cached {
			if model[h] != n {
				t.Fatalf("seed %d: block %d cached %d times, events say %d", seed, h, n, model[h])
			}
		}
		if v.c.pool.usage() != 0 {
			t.Fatalf("seed %d: blocks held after every request ended", seed)
		}
	}
}

// BlockStored events chain: each event's parent is the previous block of
// its sequence, and token_ids cover exactly its blocks.
func TestBlockStoredShape(t *testing.T) {
	v := newVsim(t, DefaultConfig("m"))
	p := prompt(40, 5)
	v.submit(Request{ID: "a", Prompt: p, MaxTokens: 30, Seed: 1})
	v.runIdle()
	var stored []events.Event
	for _, e := range v.events {
		if e.Kind == events.KindBlockStored {
			stored = append(stored, e)
		}
	}
	// 40 prompt + 29 output tokens with KV = 69 tokens: 4 full blocks; the
	// prefill stores 2, decode fills blocks 3 and 4 one at a time.
	if len(stored) != 3 {
		t.Fatalf("%d BlockStored events: %+v", len(stored), stored)
	}
	if stored[0].HasParent || len(stored[0].BlockHashes) != 2 || len(stored[0].TokenIDs) != 32 {
		t.Errorf("first event %+v", stored[0])
	}
	if !stored[1].HasParent || stored[1].ParentHash != stored[0].BlockHashes[1] {
		t.Errorf("second event's parent %d, want %d", stored[1].ParentHash, stored[0].BlockHashes[1])
	}
	for i, tok := range stored[0].TokenIDs {
		if tok != p[i] {
			t.Fatalf("token %d = %d, want %d", i, tok, p[i])
		}
	}
}

// Restart clears the cache (AllBlocksCleared) and fails running requests.
func TestRestart(t *testing.T) {
	v := newVsim(t, DefaultConfig("m"))
	s := v.submit(Request{ID: "a", Prompt: prompt(100, 1), MaxTokens: 100})
	v.step()
	v.step()
	evs := v.c.reset(ErrRestarted)
	if len(evs) != 1 || evs[0].Kind != events.KindAllBlocksCleared {
		t.Errorf("reset events %+v", evs)
	}
	if p := s.Progress(); !p.Done || p.Err == nil {
		t.Errorf("a running request survived the restart: %+v", p)
	}
	if len(v.c.pool.cachedHashes()) != 0 || v.c.pool.usage() != 0 {
		t.Error("cache not empty after restart")
	}
}

// BenchmarkStep32 measures the engine's own cost per step with 32
// sequences decoding (finished ones are replaced).
func BenchmarkStep32(b *testing.B) {
	v := &vsim{c: newCore(DefaultConfig("m"), &recorder{})}
	n := 0
	refill := func() {
		for len(v.c.running)+len(v.c.waiting) < 32 {
			s, err := v.c.newSequence(Request{ID: fmt.Sprint(n), Prompt: prompt(1000, uint64(n)), MaxTokens: 200, Seed: uint64(n)}, v.now)
			if err != nil {
				b.Fatal(err)
			}
			v.c.add(s)
			n++
		}
	}
	refill()
	b.ReportAllocs()
	for b.Loop() {
		d, ok := v.c.plan(v.now)
		if !ok {
			b.Fatal("idle")
		}
		v.now += d
		v.c.commit(v.now)
		refill()
	}
}
