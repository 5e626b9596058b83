// Package bench runs routing benchmarks: a run is (stack, fleet,
// workload, seed) -> results, a report compares runs. Every run starts
// its own Hermod stack (hermod-devstack: embedded NATS and etcd, the
// services, a vllm-sim fleet) so that runs share nothing but their specs.
package bench

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
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

// Fleet is the simulated fleet: every pod runs Cost, at its own speed
// factor: PodSpeed's when set, else the last SlowPods at SlowSpeed and
// the others at 1; Speed runs simulated time that many times faster than
// the wall clock.
type Fleet struct {
	Model     string  `json:"model"`
	Pods      int     `json:"pods"`
	SlowPods  int     `json:"slow_pods,omitempty"`
	SlowSpeed float64 `json:"slow_speed,omitempty"`
	// PodSpeed, when set, is every pod's speed factor in pod order
	// (vllm-sim's --pod-speed list): it has Pods values and replaces
	// SlowPods and SlowSpeed (see WithPodSpeeds).
	PodSpeed []float64 `json:"pod_speeds,omitempty"`
	Speed    float64   `json:"speed"`
	Cost     CostModel `json:"cost"`
	// Seed seeds the simulator (generated text).
	Seed int64 `json:"seed"`
}

// PodSpeeds returns every pod's speed factor, in pod order.
func (f Fleet) PodSpeeds() []float64 {
	if len(f.PodSpeed) > 0 {
		return slices.Clone(f.PodSpeed)
	}
	out := make([]float64, f.Pods)
	for i := range out {
		out[i] = 1
		if i >= f.Pods-f.SlowPods {
			out[i] = f.SlowSpeed
		}
	}
	return out
}

// WithPodSpeeds returns the fleet with one pod per speed factor, in
// order.
func (f Fleet) WithPodSpeeds(speeds []float64) Fleet {
	f.PodSpeed, f.Pods, f.SlowPods, f.SlowSpeed = slices.Clone(speeds), len(speeds), 0, 0
	return f
}

// SpeedList is the pods' speed factors, comma-separated (1,1,1,0.5).
func (f Fleet) SpeedList() string {
	return formatSpeeds(f.PodSpeeds())
}

func formatSpeeds(speeds []float64) string {
	parts := make([]string, len(speeds))
	for i, s := range speeds {
		parts[i] = strconv.FormatFloat(s, 'g', -1, 64)
	}
	return strings.Join(parts, ",")
}

// ParsePodSpeeds parses a comma-separated list of pod speed factors
// (1,1,1,0.5): one positive number per pod.
func ParsePodSpeeds(list string) ([]float64, error) {
	if strings.TrimSpace(list) == "" {
		return nil, errors.New("no pod speeds (want one positive number per pod, e.g. 1,1,1,0.5)")
	}
	var out []float64
	for i, field := range strings.Split(list, ",") {
		field = strings.TrimSpace(field)
		v, err := strconv.ParseFloat(field, 64)
		if err != nil {
			return nil, fmt.Errorf("pod %d: speed %q is not a number", i, field)
		}
		if err := checkSpeed(v); err != nil {
			return nil, fmt.Errorf("pod %d: %w", i, err)
		}
		out = append(out, v)
	}
	return out, nil
}

func checkSpeed(v float64) error {
	if !(v > 0) || math.IsInf(v, 0) {
		return fmt.Errorf("speed must be a positive number (got %v)", v)
	}
	return nil
}

func (f Fleet) validate() error {
	switch {
	case f.Model == "":
		return errors.New("fleet: model required")
	case f.Pods < 1:
		return fmt.Errorf("fleet: pods must be positive (got %d)", f.Pods)
	case len(f.PodSpeed) > 0 && len(f.PodSpeed) != f.Pods:
		return fmt.Errorf("fleet: %d pod speeds for %d pods", len(f.PodSpeed), f.Pods)
	case len(f.PodSpeed) > 0 && f.SlowPods > 0:
		return errors.New("fleet: pod speeds and slow pods are exclusive")
	case f.SlowPods < 0 || f.SlowPods > f.Pods:
		return fmt.Errorf("fleet: slow pods must be between 0 and %d (got %d)", f.Pods, f.SlowPods)
	case f.SlowPods > 0 && f.SlowSpeed <= 0:
		return fmt.Errorf("fleet: slow speed must be positive (got %v)", f.SlowSpeed)
	case f.Speed <= 0:
		return fmt.Errorf("fleet: speed must be positive (got %v)", f.Speed)
	}
	for i, s := range f.PodSpeed {
		if err := checkSpeed(s); err != nil {
			return fmt.Errorf("fleet: pod %d: %w", i, err)
		}
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
	Name string `json:"name"`
	// Scenario and Order place the run in a benchmark of several fleets
	// and arrival orders (the routing benchmark): the fleet's scenario
	// (identical, slow, hetero) and the workload's arrival order (0: its
	// own; k: its k-th shuffle, or Poisson seed). Empty and 0 otherwise.
	Scenario string `json:"scenario,omitempty"`
	Order    int    `json:"order"`
	Stack    Stack  `json:"stack"`
	// Router is who routes the requests: Hermod's gateway (the zero
	// value), or a picker behind the ext_proc front (Hermod's, the llm-d
	// router's).
	Router   Router             `json:"router,omitzero"`
	Fleet    Fleet              `json:"fleet"`
	Workload *workload.Workload `json:"workload"`
	// NoisyNeighbour is how many threads burn CPU beside the stack for
	// the whole run, so that the control plane competes for the machine's
	// cores as on a busy node (0: none).
	NoisyNeighbour int `json:"noisy_neighbour,omitempty"`
	// Warmup, when set, is sent (and answered) before Workload and left
	// out of the results: a fleet that has served for a while, as a
	// production pool has, so that routers that learn from what they saw
	// (predicted-latency-scorer) start from what they would know. Every
	// policy of a benchmark gets the same warm-up.
	Warmup *workload.Workload `json:"warmup,omitempty"`
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
	if err := s.Router.validate(); err != nil {
		return fmt.Errorf("run %s: %w", s.Name, err)
	}
	if err := CheckNoisyNeighbour(s.NoisyNeighbour); err != nil {
		return fmt.Errorf("run %s: noisy neighbour: %w", s.Name, err)
	}
	if err := s.Fleet.validate(); err != nil {
		return fmt.Errorf("run %s: %w", s.Name, err)
	}
	if s.Warmup != nil {
		if err := s.Warmup.Validate(); err != nil {
			return fmt.Errorf("run %s: warm-up: %w", s.Name, err)
		}
	}
	return s.Workload.Validate()
}

// WarmupWorkload is n requests of the mixed workload's sizes for a fleet,
// about one a second per pod (simulated), their ids starting with W.
func WarmupWorkload(n int, f Fleet) (*workload.Workload, error) {
	w, err := workload.Mixed(workload.MixedOptions{Requests: n, Rate: float64(f.Pods), Seed: 7, ArrivalSeed: 7})
	if err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	w.Name = "warm-up"
	for i := range w.Requests {
		w.Requests[i].ID = "W" + w.Requests[i].ID
	}
	return w, nil
}
