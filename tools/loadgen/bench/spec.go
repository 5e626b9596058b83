// Package bench runs routing benchmarks: a run is (stack, fleet,
// workload, seed) -> results, a report compares runs. Every run starts
// its own Hermod stack (hermod-devstack: embedded NATS and etcd, the
// services, a vllm-sim fleet) so that runs share nothing but their specs.
package bench

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/hermod/hermod/tools/loadgen/workload"
)

// CostModel is the simulator's engine cost model and batching limits (the
// vllm-sim flags of the same names). The fleet's pods run it at their
// speed.
type CostModel struct {
	StepOverhead        time.Duration `json:"step_overhead"`
	PrefillPerToken     time.Duration `json:"prefill_per_token"`
	DecodePerSeq        time.Duration `json:"decode_per_seq"`
	AttentionPerKVToken time.Duration `json:"attention_per_kv_token"`
	MaxNumSeqs          int           `json:"max_num_seqs"`
	MaxNumBatchedTokens int           `json:"max_num_batched_tokens"`
	NumGPUBlocks        int           `json:"num_gpu_blocks"`
	BlockSize           int           `json:"block_size"`
}

// args are the vllm-sim flags that set the model.
func (c CostModel) args() []string {
	return []string{
		"--step-overhead=" + c.StepOverhead.String(),
		"--prefill-per-token=" + c.PrefillPerToken.String(),
		"--decode-per-seq=" + c.DecodePerSeq.String(),
		"--attention-per-kv-token=" + c.AttentionPerKVToken.String(),
		"--max-num-seqs=" + strconv.Itoa(c.MaxNumSeqs),
		"--max-num-batched-tokens=" + strconv.Itoa(c.MaxNumBatchedTokens),
		"--num-gpu-blocks-override=" + strconv.Itoa(c.NumGPUBlocks),
		"--block-size=" + strconv.Itoa(c.BlockSize),
	}
}

func (c CostModel) validate() error {
	if c.StepOverhead < 0 || c.PrefillPerToken < 0 || c.DecodePerSeq < 0 || c.AttentionPerKVToken < 0 {
		return errors.New("fleet cost model: times must not be negative")
	}
	if c.MaxNumSeqs < 1 || c.MaxNumBatchedTokens < 1 || c.NumGPUBlocks < 1 || c.BlockSize < 1 {
		return errors.New("fleet cost model: max-num-seqs, max-num-batched-tokens, num-gpu-blocks and block-size must be positive")
	}
	return nil
}

// Fleet is the simulated fleet: every pod runs Cost; the last SlowPods run
// at SlowSpeed, the others at speed 1; Speed runs simulated time that
// many times faster than the wall clock.
type Fleet struct {
	Model     string    `json:"model"`
	Pods      int       `json:"pods"`
	SlowPods  int       `json:"slow_pods,omitempty"`
	SlowSpeed float64   `json:"slow_speed,omitempty"`
	Speed     float64   `json:"speed"`
	Cost      CostModel `json:"cost"`
	// Seed seeds the simulator (generated text).
	Seed int64 `json:"seed"`
}

// PodSpeeds returns every pod's speed factor, in pod order.
func (f Fleet) PodSpeeds() []float64 {
	out := make([]float64, f.Pods)
	for i := range out {
		out[i] = 1
		if i >= f.Pods-f.SlowPods {
			out[i] = f.SlowSpeed
		}
	}
	return out
}

func (f Fleet) validate() error {
	switch {
	case f.Model == "":
		return errors.New("fleet: model required")
	case f.Pods < 1:
		return fmt.Errorf("fleet: pods must be positive (got %d)", f.Pods)
	case f.SlowPods < 0 || f.SlowPods > f.Pods:
		return fmt.Errorf("fleet: slow pods must be between 0 and %d (got %d)", f.Pods, f.SlowPods)
	case f.SlowPods > 0 && f.SlowSpeed <= 0:
		return fmt.Errorf("fleet: slow speed must be positive (got %v)", f.SlowSpeed)
	case f.Speed <= 0:
		return fmt.Errorf("fleet: speed must be positive (got %v)", f.Speed)
	}
	return f.Cost.validate()
}

// Stack is how Hermod routes: an EndpointPickerConfig and the replicas.
type Stack struct {
	// Policy names the routing policy in reports.
	Policy string `json:"policy"`
	// Config is the EndpointPickerConfig YAML.
	Config  string `json:"config"`
	Pickers int    `json:"pickers"`
	// Gateways is how many gateway replicas the client spreads its
	// requests over (default 1); PairGateways gives each its own picker.
	Gateways     int  `json:"gateways,omitempty"`
	PairGateways bool `json:"pair_gateways,omitempty"`
	// Valkey runs the in-flight server (valkey-least-request-picker).
	Valkey bool `json:"valkey,omitempty"`
	// PickerArgs are more picker arguments (e.g. --local-view).
	PickerArgs []string `json:"picker_args,omitempty"`
	// GoMaxProcs, when positive, is the GOMAXPROCS of every process of
	// the stack (devstack and what it starts): the CPU budget each would
	// have as a pod with that CPU limit (Go sizes GOMAXPROCS to the
	// container's limit). Without it a stack of many processes on a small
	// machine spends its cores on the runtimes' idle spinning threads.
	GoMaxProcs int `json:"gomaxprocs,omitempty"`
}

// Spec is one run: a stack, a fleet and a workload (built from its seed).
type Spec struct {
	Name     string             `json:"name"`
	Stack    Stack              `json:"stack"`
	Fleet    Fleet              `json:"fleet"`
	Workload *workload.Workload `json:"workload"`
	// Stream sends streaming requests.
	Stream bool `json:"stream"`
	// SampleInterval is how often pod queues are sampled (simulated).
	SampleInterval time.Duration `json:"sample_interval"`
	// SendGap is the least time between two sends (simulated).
	SendGap time.Duration `json:"send_gap"`
	// Timeout bounds each request (simulated).
	Timeout time.Duration `json:"timeout"`
}

func (s *Spec) validate() error {
	if s.Name == "" {
		return errors.New("run spec: name required")
	}
	if s.Stack.Config == "" || s.Stack.Policy == "" {
		return fmt.Errorf("run %s: stack policy and config required", s.Name)
	}
	if s.Stack.Pickers < 1 {
		return fmt.Errorf("run %s: pickers must be positive (got %d)", s.Name, s.Stack.Pickers)
	}
	if s.Workload == nil {
		return fmt.Errorf("run %s: workload required", s.Name)
	}
	if err := s.Fleet.validate(); err != nil {
		return fmt.Errorf("run %s: %w", s.Name, err)
	}
	return s.Workload.Validate()
}
