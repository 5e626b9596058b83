package engine

import (
	"fmt"
	"slices"
	"time"

	"github.com/hermod/hermod/libs/kv/events"
	"github.com/hermod/hermod/tools/vllm-sim/internal/blockhash"
)

// Observer receives the engine's measurements (times are simulated).
type Observer interface {
	// Step reports one engine step: tokens scheduled in it.
	Step(tokens int)
	// PrefixCache reports a request's prefix-cache lookup: tokens queried and
	// tokens hit (first admissions only, as vLLM counts them).
	PrefixCache(queries, hits int)
	// FirstToken reports a request's time to first token and its prompt
	// length.
	FirstToken(ttft time.Duration, promptTokens int)
	// Pooled reports a pooling request's prefill done (its output, as vLLM
	// counts it for TTFT) and its prompt length; it generates no token.
	Pooled(ttft time.Duration, promptTokens int)
	// Token reports the gap before each further output token.
	Token(gap time.Duration)
	// Preempted reports one preemption.
	Preempted()
	// Finished reports a request that ended.
	Finished(RequestStats)
}

// RequestStats describes a finished request.
type RequestStats struct {
	FinishReason     string
	PromptTokens     int
	GenerationTokens int
	MaxTokens        int
	// Pooling marks a pooling request: it had no sampling parameters
	// (MaxTokens is 0).
	Pooling bool
	// N is the request's n when this sequence is the last of its request's
	// to finish (1 for a request of one sequence), 0 for the others: as
	// vLLM records n and the most tokens any of its sequences generated
	// (MaxGenerationTokens) once per request, when its last child request
	// finishes.
	N, MaxGenerationTokens int
	// Queue is arrival to first scheduled; Prefill first scheduled to first
	// token; Decode first token to the end; Inference is Prefill + Decode;
	// E2E arrival to the end.
	Queue, Prefill, Decode, Inference, E2E time.Duration
}

// core is the engine's scheduler and block pool, free of clocks and locks:
// plan picks the next step's work and returns its duration; commit applies
// it. The Engine drives it in real (sped-up) time, tests in virtual time.
type core struct {
	cfg     Config
	pool    *blockPool
	hasher  *blockhash.Hasher
	waiting []*Sequence // FIFO; preempted sequences return to the front
	running []*Sequence // in admission order; the last is preempted first
	loaded  []string    // loaded LoRA adapters, least recently used first
	loraIDs map[string]int
	obs     Observer

	// the planned step
	stepStart  time.Duration
	stepSeqs   []*Sequence
	stepTokens []int
	loads      int

	events   []events.Event // events of the current step, from plan to commit
	tokenBuf []uint32
	hashBuf  []uint64
}

func newCore(cfg Config, obs Observer) *core {
	c := &core{cfg: cfg, hasher: blockhash.New(cfg.HashSeed), obs: obs, loraIDs: map[string]int{}}
	for i, a := range cfg.Adapters {
		c.loraIDs[a] = i + 1
	}
	c.pool = newBlockPool(cfg.NumGPUBlocks, func(h uint64) {
		c.events = append(c.events, events.Event{Kind: events.KindBlockRemoved, BlockHashes: []uint64{h}, Medium: "GPU"})
	})
	return c
}

// newSequence validates a request and makes its sequence.
func (c *core) newSequence(req Request, arrival time.Duration) (*Sequence, error) {
	if req.Pooling {
		return c.newPooling(req, arrival)
	}
	n := len(req.Prompt)
	switch {
	case n == 0:
		return nil, fmt.Errorf("the prompt is empty")
	case n >= c.cfg.MaxModelLen:
		return nil, fmt.Errorf("this model's maximum context length is %d tokens, but the prompt has %d tokens", c.cfg.MaxModelLen, n)
	case req.MaxTokens < 0:
		return nil, fmt.Errorf("max_tokens must be at least 1, got %d", req.MaxTokens)
	case req.MaxTokens > 0 && n+req.MaxTokens > c.cfg.MaxModelLen:
		return nil, fmt.Errorf("this model's maximum context length is %d tokens; you requested %d tokens (%d in the prompt, %d in the completion)",
			c.cfg.MaxModelLen, n+req.MaxTokens, n, req.MaxTokens)
	}
	s, err := c.sequence(req, arrival)
	if err != nil {
		return nil, err
	}
	room := c.cfg.MaxModelLen - n
	switch {
	case len(req.Output) > 0:
		// the model writes Output and stops, unless cut short
		s.target, s.finishReason = len(req.Output), FinishStop
		limit := room
		if req.MaxTokens > 0 {
			limit = min(limit, req.MaxTokens)
		}
		if limit < s.target {
			s.target, s.finishReason = limit, FinishLength
		}
	case req.MaxTokens > 0:
		s.target, s.finishReason = req.MaxTokens, FinishLength
	case req.Chat:
		// a chat without a limit stops on its own, after a length drawn from
		// its seed
		s.target = 1 + int(splitmix64(req.Seed^0x5bd1e995)%uint64(min(c.cfg.DefaultChatOutput, room)))
		s.finishReason = FinishStop
	default:
		s.target, s.finishReason = min(16, room), FinishLength // vLLM's completions default
	}
	if need := ceilDiv(n+s.target, c.cfg.BlockSize); need > c.cfg.NumGPUBlocks {
		return nil, fmt.Errorf("the request needs more KV cache (%d tokens) than the engine has (%d blocks of %d tokens)",
			n+s.target, c.cfg.NumGPUBlocks, c.cfg.BlockSize)
	}
	return s, nil
}

// newPooling validates a pooling request and makes its sequence. Its whole
// context may be prompt (it generates nothing: up to --max-model-len
// tokens, which Validate made sure fit in the KV cache), and it finishes
// with "stop" once prefilled, as vLLM finishes pooling requests.
func (c *core) newPooling(req Request, arrival time.Duration) (*Sequence, error) {
	n := len(req.Prompt)
	switch {
	case n == 0:
		return nil, fmt.Errorf("the prompt is empty")
	case n > c.cfg.MaxModelLen:
		return nil, fmt.Errorf("this model's maximum context length is %d tokens, but the input has %d tokens", c.cfg.MaxModelLen, n)
	case req.MaxTokens != 0:
		return nil, fmt.Errorf("a pooling request generates no tokens (max_tokens %d)", req.MaxTokens)
	}
	s, err := c.sequence(req, arrival)
	if err != nil {
		return nil, err
	}
	s.finishReason = FinishStop
	return s, nil
}

// sequence makes a checked request's sequence, bound to its LoRA adapter.
func (c *core) sequence(req Request, arrival time.Duration) (*Sequence, error) {
	s := &Sequence{req: req, arrival: arrival, firstScheduled: -1, firstToken: -1, updates: make(chan struct{}, 1)}
	if req.Adapter != "" {
		id, ok := c.loraIDs[req.Adapter]
		if !ok {
			return nil, fmt.Errorf("the model %q does not exist", req.Adapter)
		}
		s.loraID, s.extra = id, []any{req.Adapter}
	}
	s.progress.PromptTokens = len(req.Prompt)
	return s, nil
}

func (c *core) add(s *Sequence) { c.waiting = append(c.waiting, s) }

// group is the sequences of one request that asked for several outputs
// (vLLM's n > 1, which it runs as n child requests of one parent).
type group struct {
	n, live      int // sequences, and those not yet finished
	maxGenerated int // the most tokens a finished one generated
}

// newGroup validates the requests of one request's n outputs and makes
// their sequences: they must share the prompt and the adapter (they may
// differ in seed and output). Later sequences share the first's Updates
// channel and, at admission, its prompt blocks (see leaderBlocks).
func (c *core) newGroup(reqs []Request, arrival time.Duration) ([]*Sequence, error) {
	seqs := make([]*Sequence, len(reqs))
	g := &group{n: len(reqs), live: len(reqs)}
	for i, req := range reqs {
		if i > 0 && (req.Adapter != reqs[0].Adapter || req.Pooling || !slices.Equal(req.Prompt, reqs[0].Prompt)) {
			return nil, fmt.Errorf("the sequences of one request must share its prompt and adapter")
		}
		s, err := c.newSequence(req, arrival)
		if err != nil {
			return nil, err
		}
		s.group = g
		if i > 0 {
			s.leader, s.updates = seqs[0], seqs[0].updates
		}
		seqs[i] = s
	}
	return seqs, nil
}

// groupDone counts a finished (or dropped) sequence of a group.
func (s *Sequence) groupDone(st *RequestStats) {
	g := s.group
	if g == nil {
		st.N, st.MaxGenerationTokens = 1, s.generated
		return
	}
	g.live--
	g.maxGenerated = max(g.maxGenerated, s.generated)
	if g.live == 0 {
		st.N, st.MaxGenerationTokens = g.n, g.maxGenerated
	}
}

func (c *core) idle() bool { return len(c.waiting) == 0 && len(c.running) == 0 }

// plan picks the work of a step starting at now and returns its duration;
// ok is false when there is nothing to do.
func (c *core) plan(now time.Duration) (time.Duration, bool) {
	// The step's events start here: allocating blocks below may evict.
	c.events = c.events[:0]
	c.dropAborted()
	c.stepStart = now
	c.stepSeqs, c.stepTokens, c.loads = c.stepSeqs[:0], c.stepTokens[:0], 0
	budget := c.cfg.MaxNumBatchedTokens
	prefillTokens, decodeSeqs, kvTokens := 0, 0, 0
	preempted := false

	// Running sequences first: decodes take one token, prefills a chunk.
	for i := 0; i < len(c.running) && budget > 0; i++ {
		s := c.running[i]
		n := min(s.contextLen()-s.numComputed, budget)
		for !c.ensureBlocks(s, s.numComputed+n) {
			victim := c.running[len(c.running)-1]
			c.preempt(victim)
			preempted = true
			if victim == s {
				n = 0
				break
			}
		}
		if n == 0 {
			break
		}
		decoding := s.generated > 0 && s.numComputed == s.contextLen()-1
		if decoding {
			decodeSeqs++
		} else {
			prefillTokens += n
		}
		kvTokens += s.numComputed + n
		budget -= n
		c.schedule(s, n)
	}

	// Then waiting sequences, in order, while there is room (none when a
	// preemption just freed blocks, as vLLM does).
	if !preempted {
		var skipped []*Sequence
		for len(c.waiting) > 0 && len(c.running) < c.cfg.MaxNumSeqs && budget > 0 {
			s := c.waiting[0]
			if s.arrival > now {
				break // not arrived yet on the step's timeline
			}
			load, ok := c.loraSlot(s)
			if !ok {
				skipped = append(skipped, s) // its adapter cannot be loaded now
				c.waiting = c.waiting[1:]
				continue
			}
			n, ok := c.admit(s, budget)
			if !ok {
				break
			}
			if load {
				c.load(s.req.Adapter)
			} else if s.req.Adapter != "" {
				c.touchAdapter(s.req.Adapter)
			}
			c.waiting = c.waiting[1:]
			c.running = append(c.running, s)
			s.state = stateRunning
			prefillTokens += n
			kvTokens += s.numComputed + n
			budget -= n
			c.schedule(s, n)
		}
		if len(skipped) > 0 {
			c.waiting = append(skipped, c.waiting...)
		}
	}
	if len(c.stepSeqs) == 0 {
		return 0, false
	}
	return c.cfg.Cost.step(prefillTokens, decodeSeqs, kvTokens, c.loads, c.cfg.PodSpeed), true
}

func (c *core) schedule(s *Sequence, n int) {
	s.planned = n
	c.stepSeqs = append(c.stepSeqs, s)
	c.stepTokens = append(c.stepTokens, n)
	if s.firstScheduled < 0 {
		s.firstScheduled = max(c.stepStart, s.arrival)
	}
}

// admit takes a waiting sequence's cached prefix and allocates blocks for
// its first chunk; it returns the chunk's token count, or false (changing
// nothing) when the pool has too few free blocks.
func (c *core) admit(s *Sequence, budget int) (int, bool) {
	bs := c.cfg.BlockSize
	ctx := s.contextLen()
	// The last token is always computed (its logits are needed), so at most
	// (ctx-1)/bs blocks can come from the cache.
	eligible := (ctx - 1) / bs
	c.extendDigests(s, eligible)
	c.hashBuf = c.hashBuf[:0]
	for _, d := range s.digests[:eligible] {
		c.hashBuf = append(c.hashBuf, wireHash(d))
	}
	hits := c.pool.lookup(c.hashBuf)
	shared := c.leaderBlocks(s, hits, eligible)
	computed := (hits + len(shared)) * bs
	n := min(ctx-computed, budget)
	need := ceilDiv(computed+n, bs) - hits - len(shared)
	// Taking free cached blocks removes them from the free queue: check
	// before touching anything that both fit.
	if need+c.pool.freeAmong(c.hashBuf[:hits]) > c.pool.numFree {
		return 0, false
	}
	s.blocks = c.pool.take(s.blocks[:0], c.hashBuf[:hits])
	s.blocks = c.pool.share(s.blocks, shared)
	s.blocks, _ = c.pool.allocate(s.blocks, need)
	s.numComputed, s.stored = computed, hits
	if !s.admittedBefore {
		s.admittedBefore = true
		s.cachedTokens = computed
		c.obs.PrefixCache(ctx, computed)
		s.update(func(p *Progress) { p.CachedTokens = computed })
	}
	return n, true
}

// leaderBlocks returns the blocks of s's prompt after its first hits that
// the first sequence of s's group holds and has computed by the end of the
// step being planned: s takes them instead of computing them again. vLLM
// caches a block when it allocates it, so the n child requests of one
// request, scheduled in one step, share their prompt's blocks from the
// start; here the first computes them and the others hold them with it.
func (c *core) leaderBlocks(s *Sequence, hits, eligible int) []int32 {
	l := s.leader
	if l == nil || l.state != stateRunning || l.aborted {
		return nil
	}
	bs := c.cfg.BlockSize
	full := min((l.numComputed+l.planned)/bs, eligible, len(s.req.Prompt)/bs, len(l.blocks))
	if full <= hits {
		return nil
	}
	return l.blocks[hits:full]
}

// ensureBlocks makes s hold blocks for its first tokens tokens.
func (c *core) ensureBlocks(s *Sequence, tokens int) bool {
	need := ceilDiv(tokens, c.cfg.BlockSize) - len(s.blocks)
	if need <= 0 {
		return true
	}
	blocks, ok := c.pool.allocate(s.blocks, need)
	if ok {
		s.blocks = blocks
	}
	return ok
}

// preempt frees a running sequence's blocks and returns it to the front of
// the queue; it will prefill its prompt and output so far again.
func (c *core) preempt(s *Sequence) {
	c.pool.release(s.blocks)
	s.blocks = s.blocks[:0]
	s.numComputed, s.stored, s.planned = 0, 0, 0
	s.state = stateWaiting
	c.running = slices.DeleteFunc(c.running, func(r *Sequence) bool { return r == s })
	c.waiting = append([]*Sequence{s}, c.waiting...)
	c.obs.Preempted()
}

// commit applies the planned step, which ended at end.
func (c *core) commit(end time.Duration) []events.Event {
	scheduled := 0
	for i, s := range c.stepSeqs {
		n := c.stepTokens[i]
		scheduled += n
		s.planned = 0
		if s.aborted || s.state != stateRunning {
			continue
		}
		s.numComputed += n
		c.storeFullBlocks(s)
		if s.numComputed < s.contextLen() {
			continue // a prefill chunk; more to come
		}
		if s.req.Pooling { // pooled: done, without a token
			s.firstToken, s.lastToken = end, end
			c.obs.Pooled(end-s.arrival, len(s.req.Prompt))
			c.finish(s, end)
			continue
		}
		s.generated++
		if s.firstToken < 0 {
			s.firstToken = end
			c.obs.FirstToken(end-s.arrival, len(s.req.Prompt))
		} else {
			c.obs.Token(end - s.lastToken)
		}
		s.lastToken = end
		if s.generated >= s.target {
			c.finish(s, end)
			continue
		}
		gen := s.generated
		s.update(func(p *Progress) {
			p.Generated = gen
			if p.TTFT == 0 {
				p.TTFT = s.firstToken - s.arrival
			}
		})
	}
	c.obs.Step(scheduled)
	c.running = slices.DeleteFunc(c.running, func(s *Sequence) bool { return s.state == stateDone })
	clear(c.stepSeqs)
	c.stepSeqs = c.stepSeqs[:0]
	return c.events
}

// storeFullBlocks caches the blocks s has filled and reports them.
func (c *core) storeFullBlocks(s *Sequence) {
	bs := c.cfg.BlockSize
	full := s.numComputed / bs
	if full <= s.stored {
		return
	}
	c.extendDigests(s, full)
	// blocks shared with the group's first sequence, which cached them
	for s.stored < full && c.pool.holds(s.blocks[s.stored], s.digests[s.stored]) {
		s.stored++
	}
	if full <= s.stored {
		return
	}
	ev := events.Event{Kind: events.KindBlockStored, BlockSize: bs, Medium: "GPU"}
	if j := s.stored; j > 0 {
		ev.ParentHash, ev.HasParent = wireHash(s.digests[j-1]), true
	}
	if s.loraID != 0 {
		ev.LoRAID, ev.HasLoRAID, ev.LoRAName = s.loraID, true, s.req.Adapter
	}
	for j := s.stored; j < full; j++ {
		c.pool.cache(s.blocks[j], s.digests[j])
		ev.BlockHashes = append(ev.BlockHashes, wireHash(s.digests[j]))
		ev.TokenIDs = s.tokens(ev.TokenIDs, j*bs, (j+1)*bs)
	}
	c.events = append(c.events, ev)
	s.stored = full
}

// extendDigests computes the digests of s's first n full blocks.
func (c *core) extendDigests(s *Sequence, n int) {
	bs := c.cfg.BlockSize
	for j := len(s.digests); j < n; j++ {
		parent := c.hasher.None()
		if j > 0 {
			parent = s.digests[j-1]
		}
		c.tokenBuf = s.tokens(c.tokenBuf[:0], j*bs, (j+1)*bs)
		d, err := c.hasher.Block(parent, c.tokenBuf, s.extra)
		if err != nil {
			panic(err) // extra keys are strings: cannot fail
		}
		s.digests = append(s.digests, d)
	}
}

func (c *core) finish(s *Sequence, end time.Duration) {
	c.pool.release(s.blocks)
	s.blocks = nil
	s.state = stateDone
	st := RequestStats{
		FinishReason:     s.finishReason,
		PromptTokens:     len(s.req.Prompt),
		GenerationTokens: s.generated,
		MaxTokens:        s.target,
		Pooling:          s.req.Pooling,
		Queue:            max(0, s.firstScheduled-s.arrival),
		Prefill:          s.firstToken - s.firstScheduled,
		Decode:           end - s.firstToken,
		Inference:        end - s.firstScheduled,
		E2E:              end - s.arrival,
	}
	s.groupDone(&st)
	c.obs.Finished(st)
	gen, reason, ttft := s.generated, s.finishReason, s.firstToken-s.arrival
	s.update(func(p *Progress) {
		p.Generated, p.Done, p.FinishReason, p.TTFT = gen, true, reason, ttft
	})
}

// abort drops a sequence at the next step.
func (c *core) abort(s *Sequence) { s.aborted = true }

func (c *core) dropAborted() {
	drop := func(s *Sequence) bool {
		if !s.aborted || s.state == stateDone {
			return false
		}
		c.pool.release(s.blocks)
		s.blocks = nil
		s.state = stateDone
		st := RequestStats{FinishReason: FinishAbort, PromptTokens: len(s.req.Prompt), GenerationTokens: s.generated}
		s.groupDone(&st)
		c.obs.Finished(st)
		s.update(func(p *Progress) { p.Done, p.FinishReason = true, FinishAbort })
		return true
	}
	c.running = slices.DeleteFunc(c.running, drop)
	c.waiting = slices.DeleteFunc(c.waiting, drop)
}

// reset drops every sequence with err and empties the block pool (an engine
// restart); it returns the AllBlocksCleared event.
func (c *core) reset(err error) []events.Event {
	for _, s := range append(c.running, c.waiting...) {
		if s.state == stateDone {
			continue
		}
		s.state = stateDone
		st := RequestStats{FinishReason: FinishError, PromptTokens: len(s.req.Prompt), GenerationTokens: s.generated}
		s.groupDone(&st)
		c.obs.Finished(st)
		s.update(func(p *Progress) { p.Done, p.FinishReason, p.Err = true, FinishError, err })
	}
	c.running, c.waiting, c.loaded = nil, nil, nil
	// a step in progress is void: its events describe blocks that are gone
	clear(c.stepSeqs)
	c.stepSeqs, c.stepTokens, c.events = c.stepSeqs[:0], c.stepTokens[:0], c.events[:0]
	c.pool.reset()
	return []events.Event{{Kind: events.KindAllBlocksCleared}}
}

// idleStart is when a step from idle starts: at the earliest arrival
// waiting (not when the engine woke up, which would add the wake-up
// latency, times the speed, to every request arriving at an idle engine).
func (c *core) idleStart(now time.Duration) time.Duration {
	if len(c.running) > 0 || len(c.waiting) == 0 {
		return now
	}
	first := c.waiting[0].arrival
	for _, s := range c.waiting[1:] {
		first = min(first, s.arrival)
	}
	return max(now, first)
}

// loraSlot reports whether s's adapter is loaded or can be loaded now (a
// slot is free, or an adapter no running sequence uses can be unloaded);
// load is true when it has to be loaded.
func (c *core) loraSlot(s *Sequence) (load, ok bool) {
	a := s.req.Adapter
	if a == "" || slices.Contains(c.loaded, a) {
		return false, true
	}
	if len(c.loaded) < c.cfg.MaxLoRAs {
		return true, true
	}
	for _, l := range c.loaded {
		if !c.adapterRunning(l) {
			return true, true
		}
	}
	return false, false
}

func (c *core) load(a string) {
	if len(c.loaded) >= c.cfg.MaxLoRAs {
		for i, l := range c.loaded { // unload the least recently used idle adapter
			if !c.adapterRunning(l) {
				c.loaded = slices.Delete(c.loaded, i, i+1)
				break
			}
		}
	}
	c.loaded = append(c.loaded, a)
	c.loads++
}

func (c *core) touchAdapter(a string) {
	if i := slices.Index(c.loaded, a); i >= 0 {
		c.loaded = append(slices.Delete(c.loaded, i, i+1), a)
	}
}

func (c *core) adapterRunning(a string) bool {
	for _, s := range c.running {
		if s.req.Adapter == a {
			return true
		}
	}
	return false
}

// adapters returns the adapters of running and of waiting sequences.
func (c *core) adapters() (running, waiting []string) {
	seen := map[string]bool{}
	for _, s := range c.running {
		if a := s.req.Adapter; a != "" && !seen[a] {
			seen[a] = true
			running = append(running, a)
		}
	}
	for _, s := range c.waiting {
		if a := s.req.Adapter; a != "" && !seen[a] {
			seen[a] = true
			waiting = append(waiting, a)
		}
	}
	return running, waiting
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }
