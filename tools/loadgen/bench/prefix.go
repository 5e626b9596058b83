package bench

import (
	"time"

	"github.com/hermod/hermod/tools/loadgen/workload"
)

// PrefixOptions shape the prefix benchmark.
type PrefixOptions struct {
	Workload workload.SharedPrefixOptions
	Fleet    Fleet
	Pickers  int
	// SampleInterval is how often queues are sampled (simulated).
	SampleInterval time.Duration
}

// PrefixFleet is the fleet of the prefix benchmark: eight pods of the
// simulator's 8B-class model, each with room for the common preamble and
// about a dozen customers' conversations in its KV cache (8000 blocks of
// 16 tokens): every customer fits somewhere, but not everywhere.
func PrefixFleet() Fleet {
	c := CostModel{
		StepOverhead: 10 * time.Millisecond, PrefillPerToken: 35 * time.Microsecond, DecodePerSeq: 200 * time.Microsecond,
		AttentionPerKVToken: 100 * time.Nanosecond, MaxNumSeqs: 256, MaxNumBatchedTokens: 8192, NumGPUBlocks: 8000, BlockSize: 16,
	}
	// speed 2: the stack's own work (tokenizing 50 KB prompts, the
	// indexer's Score) takes real time that the speed factor inflates in
	// simulated time; faster runs blur the warm requests' latencies, and
	// slower ones take the 2-core machine longer than it keeps in time
	return Fleet{Model: "meta-llama/Llama-3.1-8B-Instruct", Pods: 8, Speed: 2, Cost: c, Seed: 1}
}

// DefaultPrefix returns the prefix benchmark's defaults.
func DefaultPrefix() PrefixOptions {
	w := workload.DefaultSharedPrefix()
	// 32 customers, 16 turns each (first turns, always cold, are a
	// sixteenth of the requests), each with an 8000-token system prompt of
	// its own after a 4500-token preamble common to all (an agent's shared
	// instructions and tools): 18000 characters, beyond the approximate
	// scorer's reach (maxPrefixBlocksToMatch 256 blocks of 64 characters),
	// so it sees only the preamble and cannot tell customers apart, while
	// the engines' events show where each customer's own prompt is
	w.Customers, w.PreambleTokens, w.SystemTokens, w.Turns = 32, 4500, 8000, 16
	return PrefixOptions{Workload: w, Fleet: PrefixFleet(), Pickers: 1, SampleInterval: time.Second}
}

// PrefixPolicies are the prefix benchmark's runs, in order.
var PrefixPolicies = []string{"random", "load-only", "approx-prefix", "precise-prefix"}

// PrefixSpecs returns the prefix benchmark's runs: random, load-only,
// approximate prefix + load and precise prefix + load, streaming, on the
// same fleet and workload.
func PrefixSpecs(o PrefixOptions) ([]Spec, error) {
	w, err := workload.SharedPrefix(o.Workload)
	if err != nil {
		return nil, err
	}
	base := Spec{Fleet: o.Fleet, Workload: w, Stream: true, SampleInterval: o.SampleInterval}
	return policySpecs(PrefixPolicies, base, func(policy string) (string, Stack) {
		return policy, Stack{Policy: policy, Pickers: o.Pickers}
	})
}

// policySpecs returns a run of base per policy, named after it, each on
// the stack that stack returns for it with the config it names.
func policySpecs(policies []string, base Spec, stack func(policy string) (config string, st Stack)) ([]Spec, error) {
	var specs []Spec
	for _, policy := range policies {
		config, st := stack(policy)
		var err error
		if st.Config, err = Config(config); err != nil {
			return nil, err
		}
		s := base
		s.Name, s.Stack = policy, st
		specs = append(specs, s)
	}
	return specs, nil
}
