package bench

import (
	"time"

	"github.com/hermod/hermod/tools/loadgen/workload"
)

// MultiOptions shape the many-gateways benchmark (reference/002's local
// view problem).
type MultiOptions struct {
	Workload workload.SteadyOptions
	Fleet    Fleet
	// Gateways is how many gateway replicas the client spreads requests
	// over, each with its own picker.
	Gateways int
	// SampleInterval is how often queues are sampled (simulated).
	SampleInterval time.Duration
	// GoMaxProcs is every stack process's GOMAXPROCS (0: Go's default).
	GoMaxProcs int
}

// MultiFleet is twenty pods that each serve one request at a time (as an
// image model's pods do in reference/002), about a second each: 48 output
// tokens at 20 ms a step.
func MultiFleet() Fleet {
	c := CostModel{
		StepOverhead: 19 * time.Millisecond, PrefillPerToken: 35 * time.Microsecond, DecodePerSeq: time.Millisecond,
		AttentionPerKVToken: 100 * time.Nanosecond, MaxNumSeqs: 1, MaxNumBatchedTokens: 8192, NumGPUBlocks: 4000, BlockSize: 16,
	}
	return Fleet{Model: "meta-llama/Llama-3.1-8B-Instruct", Pods: 20, Speed: 2, Cost: c, Seed: 1}
}

// DefaultMulti returns the benchmark's defaults: as many gateways as pods
// (reference/002 ran 10 proxies for 20 pods), requests of about a second
// arriving at 90% of the fleet's capacity (20.4 requests/s).
//
// The local view's cost grows with the number of gateways: each sees
// 1/Gateways of the traffic. With 4 gateways and 8 pods a gateway's own
// least-request already spreads well (p99 1.3-1.8x the global view's in
// both a queueing simulation and real runs); with 20 it is 3.5-4.7x.
func DefaultMulti() MultiOptions {
	return MultiOptions{
		Workload: workload.SteadyOptions{Requests: 2000, Rate: 18.4, PromptTokens: 200, MaxTokens: 48, Seed: 1},
		Fleet:    MultiFleet(), Gateways: 20, SampleInterval: 500 * time.Millisecond,
		// 62 processes on the machine: each gets one core's budget, as a
		// pod with a CPU limit of 1 would.
		GoMaxProcs: 1,
	}
}

// MultiPolicies are the runs: per-gateway least-request (each picker sees
// only what its gateway sent), the event-projected global view, and the
// Valkey global view.
var MultiPolicies = []string{"local-view", "events", "valkey"}

// MultiSpecs returns the runs, each with Gateways gateways and as many
// pickers, gateway i asking picker i.
func MultiSpecs(o MultiOptions) ([]Spec, error) {
	w, err := workload.Steady(o.Workload)
	if err != nil {
		return nil, err
	}
	base := Spec{Fleet: o.Fleet, Workload: w, SampleInterval: o.SampleInterval}
	return policySpecs(MultiPolicies, base, func(policy string) (string, Stack) {
		config := "least-request"
		st := Stack{Policy: policy, Pickers: o.Gateways, Gateways: o.Gateways, PairGateways: true, GoMaxProcs: o.GoMaxProcs}
		switch policy {
		case "local-view":
			st.PickerArgs = []string{"--local-view"}
		case "valkey":
			config, st.Valkey = "valkey-least-request", true
		}
		return config, st
	})
}
