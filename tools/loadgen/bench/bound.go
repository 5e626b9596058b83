package bench

import (
	"github.com/hermod/hermod/libs/tokenizer"
	"github.com/hermod/hermod/tools/loadgen/workload"
)

// Bound is the ideal lower bound of a workload's total wall-clock on a
// fleet, in simulated seconds: no routing policy can finish sooner.
type Bound struct {
	// Work is the pod-seconds the workload needs at speed 1 with perfect
	// batching: every prompt token's prefill, every output token's decode
	// and attention over its context, and the fewest steps' fixed cost
	// (batches as large as max-num-seqs and max-num-batched-tokens allow).
	Work float64 `json:"work_pod_s"`
	// Capacity is the fleet's pod-seconds per second (the sum of its pods'
	// speeds).
	Capacity float64 `json:"capacity"`
	// FleetLimit is Work / Capacity.
	FleetLimit float64 `json:"fleet_limit_s"`
	// RequestLimit is the latest that some request can finish: its launch
	// time plus its latency alone on the fastest idle pod.
	RequestLimit float64 `json:"request_limit_s"`
	// RequestLimitID is that request.
	RequestLimitID string `json:"request_limit_id"`
	// Total is the bound: the larger of FleetLimit and RequestLimit.
	Total float64 `json:"total_s"`
}

// IdealBound computes the bound of w on fleet f. Prompts are counted with
// the simulator's tokenizer; KV-cache limits (which only make things
// slower) are ignored, so it is a true lower bound.
func IdealBound(w *workload.Workload, f Fleet) Bound {
	c := f.Cost
	var b Bound
	fastest := 0.0
	for _, s := range f.PodSpeeds() {
		b.Capacity += s
		fastest = max(fastest, s)
	}
	var tok tokenizer.Builtin
	var buf []uint32
	var promptTokens, outputTokens, tokenWork float64
	for i := range w.Requests {
		r := &w.Requests[i]
		buf = tok.Encode(buf[:0], r.Prompt)
		p, o := len(buf), r.MaxTokens
		promptTokens += float64(p)
		outputTokens += float64(o)
		tokenWork += requestWork(c, p, o)
		if end := r.At.Seconds() + soloLatency(c, p, o)/fastest; end > b.RequestLimit {
			b.RequestLimit, b.RequestLimitID = end, r.ID
		}
	}
	// a step serves at most max-num-seqs sequences and at most
	// max-num-batched-tokens tokens
	steps := max(outputTokens/float64(c.MaxNumSeqs), (promptTokens+outputTokens)/float64(c.MaxNumBatchedTokens))
	b.Work = tokenWork + steps*c.StepOverhead.Seconds()
	b.FleetLimit = b.Work / b.Capacity
	b.Total = max(b.FleetLimit, b.RequestLimit)
	return b
}

// requestWork is a request's share of step time without the fixed step
// cost: prefilling p tokens (attending over them once), then o-1 decode
// steps, each attending over the context so far. The first output token
// comes with the last prefill step.
func requestWork(c CostModel, p, o int) float64 {
	w := float64(p) * (c.PrefillPerToken + c.AttentionPerKVToken).Seconds()
	for t := 1; t < o; t++ {
		w += c.DecodePerSeq.Seconds() + float64(p+t)*c.AttentionPerKVToken.Seconds()
	}
	return w
}

// soloLatency is the request's latency alone on an idle pod of speed 1:
// its prefill in chunks of max-num-batched-tokens, then o-1 decode steps.
func soloLatency(c CostModel, p, o int) float64 {
	var d float64
	for done := 0; done < p; {
		chunk := min(c.MaxNumBatchedTokens, p-done)
		done += chunk
		d += c.StepOverhead.Seconds() + float64(chunk)*c.PrefillPerToken.Seconds() + float64(done)*c.AttentionPerKVToken.Seconds()
	}
	for t := 1; t < o; t++ {
		d += c.StepOverhead.Seconds() + c.DecodePerSeq.Seconds() + float64(p+t)*c.AttentionPerKVToken.Seconds()
	}
	return d
}
