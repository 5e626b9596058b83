package bench

import (
	"embed"
	"fmt"
	"time"

	"github.com/hermod/hermod/tools/loadgen/workload"
)

//go:embed configs/*.yaml
var configs embed.FS

// Config returns one of the benchmark's EndpointPickerConfigs by name
// (round-robin, load-aware).
func Config(name string) (string, error) {
	b, err := configs.ReadFile("configs/" + name + ".yaml")
	if err != nil {
		return "", fmt.Errorf("no benchmark config %q", name)
	}
	return string(b), nil
}

// RoutingOptions shape the routing benchmark.
type RoutingOptions struct {
	// Workload is the reference generator's knobs (default: the command
	// reference/000 runs).
	Workload workload.ReferenceOptions
	// Fleet is the simulated fleet (default: RoutingFleet).
	Fleet Fleet
	// Pickers is the picker replicas of each stack.
	Pickers int
	// Stream sends streaming requests.
	Stream bool
	// SampleInterval is how often queues are sampled (simulated).
	SampleInterval time.Duration
	// SendGap is the least time between two sends (simulated).
	SendGap time.Duration
}

// RoutingFleet is the fleet the routing benchmark runs on: four identical
// pods of a 70B-class model (Llama-3.3-70B, as in reference/000, each pod
// a tensor-parallel group of four H100s): about three times the per-token
// cost of the simulator's 8B default and a larger KV cache.
func RoutingFleet() Fleet {
	return Fleet{
		Model: "meta-llama/Llama-3.3-70B-Instruct",
		Pods:  4,
		Speed: 10,
		Cost: CostModel{
			StepOverhead:        25 * time.Millisecond,
			PrefillPerToken:     100 * time.Microsecond,
			DecodePerSeq:        600 * time.Microsecond,
			AttentionPerKVToken: 300 * time.Nanosecond,
			MaxNumSeqs:          256,
			MaxNumBatchedTokens: 8192,
			NumGPUBlocks:        32768,
			BlockSize:           16,
		},
		Seed: 1,
	}
}

// DefaultRouting returns the routing benchmark's defaults.
func DefaultRouting() RoutingOptions {
	return RoutingOptions{Workload: workload.ReferenceCommand(), Fleet: RoutingFleet(), Pickers: 1, SampleInterval: time.Second, SendGap: 20 * time.Millisecond}
}

// RoutingSpecs returns the routing benchmark's runs: round-robin (the
// baseline) and load-aware, on the same fleet and the same workload.
func RoutingSpecs(o RoutingOptions) ([]Spec, error) {
	w, err := workload.Reference(o.Workload)
	if err != nil {
		return nil, err
	}
	var specs []Spec
	for _, policy := range []string{"round-robin", "load-aware"} {
		cfg, err := Config(policy)
		if err != nil {
			return nil, err
		}
		specs = append(specs, Spec{
			Name:  policy,
			Stack: Stack{Policy: policy, Config: cfg, Pickers: o.Pickers},
			Fleet: o.Fleet, Workload: w, Stream: o.Stream, SampleInterval: o.SampleInterval, SendGap: o.SendGap,
		})
	}
	return specs, nil
}
