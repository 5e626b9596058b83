package engine

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/hermod/hermod/libs/kv/events"
)

// submitGroup queues the n sequences of one request, as Engine.SubmitGroup.
func (v *vsim) submitGroup(reqs []Request) []*Sequence {
	v.t.Helper()
	seqs, err := v.c.newGroup(reqs, v.now)
	if err != nil {
		v.t.Fatal(err)
	}
	for _, s := range seqs {
		v.c.add(s)
	}
	return seqs
}

func groupRequests(p []uint32, n, maxTokens int) []Request {
	reqs := make([]Request, n)
	for i := range reqs {
		reqs[i] = Request{ID: fmt.Sprint(i), Prompt: p, MaxTokens: maxTokens, Seed: 100 + uint64(i)}
	}
	return reqs
}

// The n sequences of one request share its prompt's blocks from the
// step that admits them, as vLLM's child requests do (it caches a block
// when it allocates it): the prompt is prefilled and stored once, each
// other sequence computes only the tokens after its last full block.
func TestGroupSharesPromptBlocks(t *testing.T) {
	for _, batched := range []int{8192, 512} { // one step's prefill; chunked
		t.Run(fmt.Sprint(batched), func(t *testing.T) {
			cfg := DefaultConfig("m")
			cfg.MaxNumBatchedTokens = batched
			v := newVsim(t, cfg)
			p := prompt(1000, 5) // 62 full blocks and 8 tokens
			seqs := v.submitGroup(groupRequests(p, 4, 5))
			for len(v.c.running) < 4 {
				if !v.step() {
					t.Fatal("idle before all four sequences ran")
				}
			}
			// the first holds 63 blocks, each other its last partial one
			if used := len(v.c.pool.blocks) - v.c.pool.numFree; used != 63+3 {
				t.Errorf("%d blocks in use with four sequences running, want 66", used)
			}
			v.runIdle()
			// Each of the others found the 62 full blocks (992 tokens).
			if v.obs.queries != 4000 || v.obs.hits != 3*992 {
				t.Errorf("prefix cache queries %d hits %d, want 4000 and %d", v.obs.queries, v.obs.hits, 3*992)
			}
			for i, s := range seqs {
				want := 0
				if i > 0 {
					want = 992
				}
				if pr := s.Progress(); !pr.Done || pr.Generated != 5 || pr.CachedTokens != want {
					t.Errorf("sequence %d: %+v, want 5 tokens and %d cached", i, pr, want)
				}
			}
			// stored once: no hash of the prompt's blocks twice
			seen := map[uint64]int{}
			for _, e := range v.events {
				if e.Kind == events.KindBlockStored {
					for _, h := range e.BlockHashes {
						seen[h]++
					}
				}
			}
			if len(seen) != 62 {
				t.Errorf("%d blocks stored, want the prompt's 62", len(seen))
			}
			for h, n := range seen {
				if n != 1 {
					t.Errorf("block %x stored %d times", h, n)
				}
			}
			// the first token of each comes in the same step
			for i := 1; i < 4; i++ {
				if d := v.obs.ttfts[i] - v.obs.ttfts[0]; d != 0 {
					t.Errorf("sequence %d's first token %s after the first's", i, d)
				}
			}
			// the outputs differ (their seeds do)
			out := func(s *Sequence) []uint32 { return s.tokens(nil, 1000, 1005) }
			if slices.Equal(out(seqs[0]), out(seqs[1])) {
				t.Error("two outputs of a group are the same")
			}
			if v.c.pool.numFree != len(v.c.pool.blocks) {
				t.Errorf("%d blocks still held", len(v.c.pool.blocks)-v.c.pool.numFree)
			}
		})
	}
}

// A group's n and the most tokens any of its sequences generated are
// reported once, with the last of them to finish (vLLM's
// request_params_n and request_max_num_generation_tokens); the other
// figures once per sequence.
func TestGroupStats(t *testing.T) {
	v := newVsim(t, DefaultConfig("m"))
	reqs := groupRequests(prompt(40, 1), 3, 0)
	for i := range reqs {
		reqs[i].MaxTokens = 3 + i
	}
	v.submitGroup(reqs)
	v.submit(Request{ID: "single", Prompt: prompt(40, 2), MaxTokens: 2})
	v.runIdle()
	if len(v.obs.finished) != 4 {
		t.Fatalf("%d finished", len(v.obs.finished))
	}
	var ns, maxGen []int
	for _, st := range v.obs.finished {
		if st.N > 0 {
			ns, maxGen = append(ns, st.N), append(maxGen, st.MaxGenerationTokens)
		}
	}
	slices.Sort(ns)
	slices.Sort(maxGen)
	if !slices.Equal(ns, []int{1, 3}) || !slices.Equal(maxGen, []int{2, 5}) {
		t.Errorf("per-request n %v and max generation tokens %v, want [1 3] and [2 5]", ns, maxGen)
	}
}

// A group's sequences share their prompt and adapter; a group any of
// whose requests the engine cannot serve is refused whole.
func TestGroupRefused(t *testing.T) {
	cfg := DefaultConfig("m")
	cfg.MaxModelLen = 100
	v := newVsim(t, cfg)
	reqs := groupRequests(prompt(40, 1), 2, 5)
	reqs[1].Prompt = prompt(40, 2)
	if _, err := v.c.newGroup(reqs, 0); err == nil {
		t.Error("a group with two prompts accepted")
	}
	reqs = groupRequests(prompt(40, 1), 2, 5)
	reqs[1].MaxTokens = 80
	if _, err := v.c.newGroup(reqs, 0); err == nil {
		t.Error("a group with a request too long accepted")
	}
	if len(v.c.waiting) != 0 {
		t.Errorf("%d sequences queued", len(v.c.waiting))
	}
}

// A request's Output is generated as given: it stops after its last
// token, or at max_tokens.
func TestOutputGiven(t *testing.T) {
	v := newVsim(t, DefaultConfig("m"))
	out := prompt(30, 9)
	whole := v.submit(Request{ID: "a", Prompt: prompt(20, 1), Chat: true, Output: out})
	cut := v.submit(Request{ID: "b", Prompt: prompt(20, 1), MaxTokens: 10, Output: out})
	v.runIdle()
	if pr := whole.Progress(); pr.Generated != 30 || pr.FinishReason != FinishStop {
		t.Errorf("whole output: %+v", pr)
	}
	if pr := cut.Progress(); pr.Generated != 10 || pr.FinishReason != FinishLength {
		t.Errorf("cut output: %+v", pr)
	}
	if got := whole.tokens(nil, 20, 50); !slices.Equal(got, out) {
		t.Errorf("output tokens %v, want %v", got, out)
	}
}

// The simulated logprobs are deterministic, below 0, the sampled token's
// the highest, the others distinct, sorted and not the sampled text.
func TestLogprobs(t *testing.T) {
	for i := range 50 {
		sampled := OutputText(7, i)
		lp, cands := Logprobs(nil, 7, i, sampled, 19)
		again, cands2 := Logprobs(nil, 7, i, sampled, 19)
		if lp != again || !slices.Equal(cands, cands2) {
			t.Fatal("logprobs differ between calls")
		}
		if lp >= 0 || len(cands) != 19 {
			t.Fatalf("token %d: logprob %v, %d others", i, lp, len(cands))
		}
		prev, mass := lp, math.Exp(lp)
		seen := map[string]bool{sampled: true}
		for _, c := range cands {
			if c.Logprob >= prev || seen[c.Text] {
				t.Errorf("token %d: %+v after %v (seen %v)", i, c, prev, seen[c.Text])
			}
			seen[c.Text] = true
			prev = c.Logprob
			mass += math.Exp(c.Logprob)
		}
		if mass >= 1 {
			t.Errorf("token %d: probabilities sum to %v", i, mass)
		}
	}
}
