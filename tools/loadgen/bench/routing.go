package bench

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/hermod/hermod/tools/loadgen/workload"
)

//go:embed configs/*.yaml
var configs embed.FS

// Config returns one of the benchmark's EndpointPickerConfigs by name
// (configs/<name>.yaml: round-robin, load-aware, ...).
func Config(name string) (string, error) {
	b, err := configs.ReadFile("configs/" + name + ".yaml")
	if err != nil {
		return "", fmt.Errorf("no benchmark config %q (configs/%s.yaml; have %s)", name, name, strings.Join(Configs(), ", "))
	}
	return string(b), nil
}

// Configs lists the benchmark's EndpointPickerConfigs by name, sorted.
func Configs() []string {
	files, _ := fs.Glob(configs, "configs/*.yaml") // the pattern is valid
	out := make([]string, len(files))
	for i, f := range files {
		out[i] = strings.TrimSuffix(path.Base(f), ".yaml")
	}
	return out
}

// The routing benchmark's fleet scenarios.
const (
	// ScenarioIdentical is the fleet as given (by default four identical
	// pods).
	ScenarioIdentical = "identical"
	// ScenarioSlow is the same fleet with its last pod at half its speed.
	ScenarioSlow = "slow"
	// ScenarioHetero is a fleet of unequal pods (HeteroOptions.PodSpeed)
	// under a mixed-size Poisson workload: its figure is p90 latency.
	ScenarioHetero = "hetero"
)

// Scenarios are the routing benchmark's fleet scenarios, in order.
var Scenarios = []string{ScenarioIdentical, ScenarioSlow, ScenarioHetero}

// RoutingPolicies are the routing benchmark's policies, in order: each
// runs when configs/<policy>.yaml exists (AvailablePolicies).
var RoutingPolicies = []string{"round-robin", "load-aware", "predicted-latency"}

// RoutingBaseline is the policy the others are compared to.
const RoutingBaseline = "round-robin"

// AvailablePolicies returns the policies that have a config, in order.
func AvailablePolicies(policies []string) (have, missing []string) {
	all := Configs()
	for _, p := range policies {
		if slices.Contains(all, p) {
			have = append(have, p)
		} else {
			missing = append(missing, p)
		}
	}
	return have, missing
}

// RoutingOptions shape the routing benchmark.
type RoutingOptions struct {
	// Workload is the reference generator's knobs (default: the command
	// reference/000 runs); its seed also seeds the orders' shuffles.
	Workload workload.ReferenceOptions
	// Fleet is the simulated fleet of the identical and slow scenarios
	// (default: RoutingFleet).
	Fleet Fleet
	// Pickers is the picker replicas of each stack.
	Pickers int
	// Stream sends streaming requests.
	Stream bool
	// SampleInterval is how often queues are sampled (simulated).
	SampleInterval time.Duration
	// SendGap is the least time between two sends (simulated).
	SendGap time.Duration
	// Orders is how many arrival orders every policy runs on each fleet:
	// the workload's own, then Orders-1 seeded shuffles of the same
	// requests (workload.Workload.Order); on the hetero fleet, Orders
	// seeds of the Poisson process.
	Orders int
	// Policies are the routing policies run (configs/<policy>.yaml).
	Policies []string
	// Fleets are the scenarios run (Scenarios).
	Fleets []string
	// Hetero shapes the hetero scenario.
	Hetero HeteroOptions
	// Warmup is how many requests warm every run's fleet up before its
	// workload (WarmupWorkload; 0: none).
	Warmup int
}

// HeteroOptions shape the hetero scenario: a fleet of unequal pods (the
// routing fleet's model and costs) and a Poisson stream of requests of
// mixed sizes.
type HeteroOptions struct {
	// Workload is the mixed workload; its ArrivalSeed is set per order,
	// and a zero Rate is set from Load.
	Workload workload.MixedOptions
	// PodSpeed is the fleet's pod speeds (default 1,1,0.5,2).
	PodSpeed []float64
	// Load, when Workload.Rate is 0, sets the rate: the offered work as a
	// share of the fleet's capacity, both on the ideal bound's cost model
	// (IdealBound: perfect batching, so the pods are busier than this).
	Load float64
	// Stream streams the scenario's requests (whatever RoutingOptions
	// says), so that their TTFT is measured.
	Stream bool
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

// DefaultHetero returns the hetero scenario's defaults: pods at speeds
// 1, 1, 0.5 and 2 (capacity 4.5), 1200 requests of DefaultMixedClasses
// offered at 75% of the fleet's capacity (about 11 requests/s, so about
// 110 s of arrivals).
func DefaultHetero() HeteroOptions {
	return HeteroOptions{
		Workload: workload.MixedOptions{Requests: 1200, Classes: workload.DefaultMixedClasses(), Seed: workload.ReferenceCommand().Seed},
		PodSpeed: []float64{1, 1, 0.5, 2},
		Load:     0.6,
		Stream:   true,
	}
}

// DefaultRouting returns the routing benchmark's defaults: every fleet
// scenario, five orders, and the policies of RoutingPolicies that have a
// config.
func DefaultRouting() RoutingOptions {
	policies, _ := AvailablePolicies(RoutingPolicies)
	return RoutingOptions{
		Workload: workload.ReferenceCommand(), Fleet: RoutingFleet(), Pickers: 1, SampleInterval: time.Second, SendGap: 20 * time.Millisecond,
		Orders: 5, Policies: policies, Fleets: slices.Clone(Scenarios), Hetero: DefaultHetero(), Warmup: 32,
	}
}

// Validate checks the options (the workloads' own knobs are checked when
// they are built).
func (o RoutingOptions) Validate() error {
	var errs []error
	if o.Orders < 1 {
		errs = append(errs, fmt.Errorf("orders: must be at least 1 (got %d)", o.Orders))
	}
	if o.Pickers < 1 {
		errs = append(errs, fmt.Errorf("pickers: must be positive (got %d)", o.Pickers))
	}
	if o.Warmup < 0 {
		errs = append(errs, fmt.Errorf("warmup: must not be negative (got %d)", o.Warmup))
	}
	if len(o.Policies) == 0 {
		errs = append(errs, errors.New("policies: at least one required"))
	}
	for i, p := range o.Policies {
		if slices.Index(o.Policies, p) < i {
			errs = append(errs, fmt.Errorf("policies: %s given twice", p))
		} else if _, err := Config(p); err != nil {
			errs = append(errs, fmt.Errorf("policies: %w", err))
		}
	}
	if len(o.Fleets) == 0 {
		errs = append(errs, errors.New("fleets: at least one scenario required"))
	}
	for i, f := range o.Fleets {
		switch {
		case !slices.Contains(Scenarios, f):
			errs = append(errs, fmt.Errorf("fleets: unknown scenario %q (have %s)", f, strings.Join(Scenarios, ", ")))
		case slices.Index(o.Fleets, f) < i:
			errs = append(errs, fmt.Errorf("fleets: %s given twice", f))
		}
	}
	if err := o.Fleet.validate(); err != nil {
		errs = append(errs, err)
	}
	if slices.Contains(o.Fleets, ScenarioHetero) {
		if err := o.Hetero.validate(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (h HeteroOptions) validate() error {
	if len(h.PodSpeed) == 0 {
		return errors.New("hetero: pod speeds required")
	}
	for i, s := range h.PodSpeed {
		if err := checkSpeed(s); err != nil {
			return fmt.Errorf("hetero: pod %d: %w", i, err)
		}
	}
	if h.Workload.Rate == 0 && (!(h.Load > 0) || math.IsInf(h.Load, 0)) {
		return fmt.Errorf("hetero: load must be positive (got %v)", h.Load)
	}
	if h.Workload.Rate < 0 || math.IsInf(h.Workload.Rate, 0) || math.IsNaN(h.Workload.Rate) {
		return fmt.Errorf("hetero: rate must be positive, or 0 to follow the load (got %v)", h.Workload.Rate)
	}
	return nil
}

// SlowFleet is f with its last pod at half its speed.
func SlowFleet(f Fleet) Fleet {
	speeds := f.PodSpeeds()
	speeds[len(speeds)-1] /= 2
	return f.WithPodSpeeds(speeds)
}

// HeteroFleet is f's model, costs and simulator speed on pods of the
// given speeds.
func HeteroFleet(f Fleet, speeds []float64) Fleet {
	return f.WithPodSpeeds(speeds)
}

// HeteroRate is the arrival rate at which the mixed workload o offers the
// fleet load times its capacity on the ideal bound's cost model: load x
// capacity / (work per request).
func HeteroRate(o workload.MixedOptions, f Fleet, load float64) (float64, error) {
	o.Rate = 1
	w, err := workload.Mixed(o)
	if err != nil {
		return 0, fmt.Errorf("hetero workload: %w", err)
	}
	b := IdealBound(w, f)
	return load * b.Capacity * float64(len(w.Requests)) / b.Work, nil
}

// scenarioRuns are one scenario's fleet and its workload per order.
type scenarioRuns struct {
	fleet  Fleet
	orders []*workload.Workload
}

func (o RoutingOptions) scenario(name string) (scenarioRuns, error) {
	var s scenarioRuns
	switch name {
	case ScenarioIdentical, ScenarioSlow:
		w, err := workload.Reference(o.Workload)
		if err != nil {
			return s, err
		}
		s.fleet = o.Fleet
		if name == ScenarioSlow {
			s.fleet = SlowFleet(o.Fleet)
		}
		for k := range o.Orders {
			s.orders = append(s.orders, w.Order(o.Workload.Seed, k))
		}
	case ScenarioHetero:
		s.fleet = HeteroFleet(o.Fleet, o.Hetero.PodSpeed)
		mo := o.Hetero.Workload
		if mo.Rate == 0 {
			var err error
			if mo.Rate, err = HeteroRate(mo, s.fleet, o.Hetero.Load); err != nil {
				return s, err
			}
		}
		for k := range o.Orders {
			mo.ArrivalSeed = workload.OrderSeed(mo.Seed, k)
			w, err := workload.Mixed(mo)
			if err != nil {
				return s, fmt.Errorf("hetero workload: %w", err)
			}
			if o.Hetero.Workload.Rate == 0 {
				w.Summary = append(w.Summary, fmt.Sprintf("[Load] rate %.2f/s offers %.0f%% of the fleet's capacity (%s) on the ideal bound's cost model", mo.Rate, 100*o.Hetero.Load, s.fleet.SpeedList()))
			}
			s.orders = append(s.orders, w)
		}
	default:
		return s, fmt.Errorf("unknown fleet scenario %q", name)
	}
	return s, nil
}

// RoutingSpecs returns the routing benchmark's runs: on every fleet
// scenario, every arrival order, every policy (in that nesting, so that
// the policies of one order run close together in time), each policy of
// an order on the same fleet and the same workload.
func RoutingSpecs(o RoutingOptions) ([]Spec, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	cfgs := make([]string, len(o.Policies))
	for i, p := range o.Policies {
		var err error
		if cfgs[i], err = Config(p); err != nil {
			return nil, err
		}
	}
	var specs []Spec
	for _, name := range o.Fleets {
		s, err := o.scenario(name)
		if err != nil {
			return nil, fmt.Errorf("fleet %s: %w", name, err)
		}
		var warm *workload.Workload
		if o.Warmup > 0 {
			if warm, err = WarmupWorkload(o.Warmup, s.fleet); err != nil {
				return nil, err
			}
		}
		for k, w := range s.orders {
			for i, policy := range o.Policies {
				specs = append(specs, Spec{
					Name: fmt.Sprintf("%s-%s-o%d", name, policy, k), Scenario: name, Order: k,
					Stack: Stack{Policy: policy, Config: cfgs[i], Pickers: o.Pickers},
					Fleet: s.fleet, Workload: w, Warmup: warm, Stream: o.Stream || (name == ScenarioHetero && o.Hetero.Stream),
					SampleInterval: o.SampleInterval, SendGap: o.SendGap,
				})
			}
		}
	}
	return specs, nil
}

// Estimate is a rough wall-clock duration of the runs: per run, the
// stack's start and stop plus half again the ideal bound (most policies
// finish between the bound and twice it) at the simulator's speed.
// Bounds are computed once per scenario and order (the same for each
// policy).
func Estimate(specs []Spec) time.Duration {
	const perRun = 5 * time.Second // stack start, settle and stop on a 2-core machine
	bounds := map[*workload.Workload]float64{}
	var d time.Duration
	for i := range specs {
		s := &specs[i]
		b, ok := bounds[s.Workload]
		if !ok {
			b = IdealBound(s.Workload, s.Fleet).Total
			bounds[s.Workload] = b
		}
		d += perRun + time.Duration(1.5*b/s.Fleet.Speed*float64(time.Second))
	}
	return d
}
