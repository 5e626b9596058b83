// Command hermod-bench runs Hermod's routing benchmarks: each run starts
// its own stack (hermod-devstack) on a seeded vllm-sim fleet, sends a
// workload and records the results; a report compares the runs.
//
//	hermod-bench routing [flags]          routing policies over arrival orders and fleets (make bench)
//	hermod-bench prefix [flags]           random, load-only, approximate and precise prefix (make bench-prefix)
//	hermod-bench multi [flags]            4 gateways: per-gateway least-request, events and Valkey global views (make bench-multi)
//	hermod-bench peers [flags]            Hermod's picker beside the llm-d router's EPP, same fleet, workload and config (make bench-peers)
//	hermod-bench report --out DIR FILE... a report from saved results
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hermod/hermod/libs/cmdline"
	"github.com/hermod/hermod/tools/loadgen/bench"
)

func main() { cmdline.Main("hermod-bench", run) }

const usage = `Usage:
  hermod-bench routing [flags]           routing policies over arrival orders and fleets (reference/000's workload, a mixed Poisson one)
  hermod-bench prefix [flags]            random, load-only, approximate and precise prefix routing on shared prefixes
  hermod-bench multi [flags]             many gateways: per-gateway least-request against the global views (events, Valkey)
  hermod-bench peers [flags]             Hermod's picker beside the llm-d router's EPP (--epp or --llmd-src), same fleet, workload and config
  hermod-bench report --out DIR FILE...  compare saved results (results-*.json)
`

func run() error {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		return errors.New("a subcommand is required")
	}
	switch os.Args[1] {
	case "routing":
		return routing(os.Args[2:])
	case "prefix":
		return prefix(os.Args[2:])
	case "multi":
		return multi(os.Args[2:])
	case "peers":
		return peers(os.Args[2:])
	case "report":
		return report(os.Args[2:])
	case "-h", "--help", "help":
		fmt.Print(usage)
		return nil
	}
	fmt.Fprint(os.Stderr, usage)
	return fmt.Errorf("unknown subcommand %q", os.Args[1])
}

// routingCmd is a parsed hermod-bench routing command line.
type routingCmd struct {
	opts        bench.RoutingOptions
	run         *runFlags
	recommended string
	// defaultFleets is set when --fleets was not given: a fleet the
	// devstack cannot start is then left out, not an error.
	defaultFleets bool
	// missingPolicies are default policies with no config in this build.
	missingPolicies []string
}

// parseRouting parses and checks hermod-bench routing's flags (usage and
// flag errors go to output).
func parseRouting(args []string, output io.Writer) (*routingCmd, error) {
	c := &routingCmd{opts: bench.DefaultRouting()}
	o := &c.opts
	fs := flag.NewFlagSet("hermod-bench routing", flag.ContinueOnError)
	fs.SetOutput(output)
	c.run = addRunFlags(fs, "bench-out/routing")
	fs.Float64Var(&o.Fleet.Speed, "speed", o.Fleet.Speed, "the simulator's speed factor (simulated seconds per wall-clock second)")
	fs.IntVar(&o.Fleet.Pods, "pods", o.Fleet.Pods, "pods in the fleet")
	fs.IntVar(&o.Fleet.SlowPods, "slow-pods", o.Fleet.SlowPods, "pods running at --slow-speed (the last ones)")
	fs.Float64Var(&o.Fleet.SlowSpeed, "slow-speed", 0.5, "speed factor of the slow pods")
	podSpeeds := &speedsValue{}
	fs.Var(podSpeeds, "pod-speeds", "speed factor of every pod, comma-separated (e.g. 1,1,1,0.5; replaces --pods, --slow-pods and --slow-speed)")
	fs.Int64Var(&o.Fleet.Seed, "sim-seed", o.Fleet.Seed, "the simulator's seed")
	fs.IntVar(&o.Pickers, "pickers", o.Pickers, "picker replicas of each stack")
	fs.BoolVar(&o.Stream, "stream", o.Stream, "send streaming requests")
	fs.DurationVar(&o.SendGap, "send-gap", o.SendGap, "least simulated time between two sends (requests due at once leave in order, this far apart)")
	fs.IntVar(&o.Workload.Total, "total", o.Workload.Total, "requests in the reference workload")
	fs.IntVar(&o.Workload.HeavySeeds, "heavy-seeds", o.Workload.HeavySeeds, "heavy requests sent first")
	fs.Int64Var(&o.Workload.Seed, "seed", o.Workload.Seed, "the workloads' seed (42 is the reference's); every order's shuffle or Poisson seed derives from it")
	fs.IntVar(&o.Orders, "orders", o.Orders, "arrival orders per fleet and policy: the workload's own, then seeded shuffles of the same requests (hetero: seeds of the Poisson process)")
	fs.IntVar(&o.Warmup, "warmup", o.Warmup, "requests of mixed sizes every run sends (and leaves out of its results) before its workload, so that a router that learns starts from what a serving pool would know (0: none)")
	var fleets, policies cmdline.List
	fs.Var(&fleets, "fleets", "fleet scenarios, comma-separated: identical (the fleet as given), slow (its last pod at half speed), hetero (--hetero-speeds, mixed-size Poisson workload) (default "+strings.Join(bench.Scenarios, ",")+")")
	fs.Var(&policies, "policies", "routing policies, comma-separated, each a config in tools/loadgen/bench/configs (default "+strings.Join(bench.RoutingPolicies, ",")+": those with a config in this build)")
	fs.StringVar(&c.recommended, "recommended", "predicted-latency", "the policy the report's targets hold to the bound, round-robin and load-aware")
	fs.IntVar(&o.Hetero.Workload.Requests, "hetero-requests", o.Hetero.Workload.Requests, "requests of the hetero fleet's mixed workload")
	fs.Float64Var(&o.Hetero.Workload.Rate, "hetero-rate", o.Hetero.Workload.Rate, "arrivals per second (simulated) of the hetero workload (0: the rate that offers --hetero-load)")
	fs.Float64Var(&o.Hetero.Load, "hetero-load", o.Hetero.Load, "offered load of the hetero workload, a share of the fleet's capacity on the ideal bound's cost model (when --hetero-rate is 0)")
	heteroSpeeds := &speedsValue{speeds: o.Hetero.PodSpeed}
	fs.Var(heteroSpeeds, "hetero-speeds", "speed factor of every pod of the hetero fleet, comma-separated")
	if err := cmdline.Parse(fs, args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if podSpeeds.speeds != nil {
		if set["slow-pods"] || set["slow-speed"] {
			return nil, errors.New("--pod-speeds replaces --slow-pods and --slow-speed: give one or the other")
		}
		if set["pods"] && o.Fleet.Pods != len(podSpeeds.speeds) {
			return nil, fmt.Errorf("--pod-speeds gives %d pods, --pods %d", len(podSpeeds.speeds), o.Fleet.Pods)
		}
		o.Fleet = o.Fleet.WithPodSpeeds(podSpeeds.speeds)
	}
	if set["hetero-rate"] && set["hetero-load"] {
		return nil, errors.New("--hetero-rate and --hetero-load both set the hetero workload's rate: give one")
	}
	o.Hetero.PodSpeed = heteroSpeeds.speeds
	o.Hetero.Workload.Seed = o.Workload.Seed
	c.defaultFleets = len(fleets) == 0
	if !c.defaultFleets {
		o.Fleets = fleets
	}
	if len(policies) > 0 {
		o.Policies = policies
	} else {
		_, c.missingPolicies = bench.AvailablePolicies(bench.RoutingPolicies)
	}
	if c.recommended == "" {
		return nil, errors.New("--recommended: a policy required")
	}
	if err := c.run.validate(); err != nil {
		return nil, err
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// speedsValue is a flag of pod speed factors, comma-separated.
type speedsValue struct{ speeds []float64 }

func (v *speedsValue) String() string {
	if v == nil || len(v.speeds) == 0 {
		return ""
	}
	return bench.Fleet{}.WithPodSpeeds(v.speeds).SpeedList()
}

func (v *speedsValue) Set(s string) error {
	speeds, err := bench.ParsePodSpeeds(s)
	if err != nil {
		return err
	}
	v.speeds = speeds
	return nil
}

func routing(args []string) error {
	c, err := parseRouting(args, os.Stderr)
	if err != nil {
		return err
	}
	binDir, err := c.run.resolveBinDir()
	if err != nil {
		return err
	}
	o := &c.opts
	if len(c.missingPolicies) > 0 {
		fmt.Printf("No config in this build for %s (tools/loadgen/bench/configs/<policy>.yaml): running %s; targets about it are reported as not run.\n",
			strings.Join(c.missingPolicies, ", "), strings.Join(o.Policies, ", "))
	}
	specs, err := bench.RoutingSpecs(*o)
	if err != nil {
		return err
	}
	if err := bench.CheckDevstack(binDir, specs); err != nil {
		if !c.defaultFleets || !errors.Is(err, bench.ErrNoPodSpeeds) || !slices.Contains(o.Fleets, bench.ScenarioHetero) {
			return err
		}
		fmt.Printf("Leaving out the hetero fleet: %v.\nName it in --fleets to make this an error.\n", err)
		o.Fleets = slices.DeleteFunc(o.Fleets, func(f string) bool { return f == bench.ScenarioHetero })
		if specs, err = bench.RoutingSpecs(*o); err != nil {
			return err
		}
		if err := bench.CheckDevstack(binDir, specs); err != nil {
			return err
		}
	}
	var fleets []string
	for _, name := range o.Fleets {
		i := slices.IndexFunc(specs, func(s bench.Spec) bool { return s.Scenario == name })
		fleets = append(fleets, fmt.Sprintf("%s (%s)", name, specs[i].Fleet.SpeedList()))
	}
	fmt.Printf("Routing benchmark: fleets %s x %d orders x policies %s = %d runs.\n", strings.Join(fleets, ", "), o.Orders, strings.Join(o.Policies, ", "), len(specs))
	title := fmt.Sprintf("Routing benchmark: %s over %d arrival orders on fleets %s", strings.Join(o.Policies, ", "), o.Orders, strings.Join(o.Fleets, ", "))
	rep, err := runAll(specs, binDir, c.run, func(runs []*bench.RunResult) (*bench.RoutingReport, error) {
		return bench.NewRoutingReport(title, c.recommended, runs)
	})
	if err != nil {
		return err
	}
	fmt.Println("Targets:")
	for _, t := range rep.Targets {
		fmt.Printf("  (%s) %s: %s — %s\n", t.ID, t.Scenario, t.Status, t.Detail)
	}
	return nil
}

// reporter is a report of runs.
type reporter interface {
	// Write saves the report into a directory and returns its markdown.
	Write(dir string) (string, error)
}

// runAll runs the specs one after the other (each with the run flags'
// noisy neighbour), saving each run's results as it ends, then writes the
// report that build makes of them. When a run fails, the report of the
// runs done so far is written before the error is returned.
func runAll[R reporter](specs []bench.Spec, binDir string, rf *runFlags, build func([]*bench.RunResult) (R, error)) (R, error) {
	var none R
	ctx, stop := cmdline.SignalContext(context.Background())
	defer stop()
	for i := range specs {
		specs[i].NoisyNeighbour = rf.noisy
	}
	if err := os.MkdirAll(rf.out, 0o755); err != nil {
		return none, err
	}
	estimate := bench.Estimate(specs)
	fmt.Printf("%d runs, about %s (rough: per run, the stack's start and stop plus 1.5x the ideal bound at the simulator's speed).\n", len(specs), estimate.Round(time.Minute))
	began := time.Now()
	var runs []*bench.RunResult
	var runErr error
	for i, spec := range specs {
		left := estimate
		if i > 0 {
			left = time.Since(began) / time.Duration(i) * time.Duration(len(specs)-i)
		}
		fmt.Fprintf(os.Stderr, "\n[%d/%d] %s (elapsed %s, about %s left)\n", i+1, len(specs), spec.Name, time.Since(began).Round(time.Second), left.Round(time.Second))
		r, err := runLogged(ctx, binDir, rf.out, spec, rf.stackLog)
		if err == nil {
			err = bench.WriteResult(rf.out, r)
		}
		if err != nil {
			runErr = err
			break
		}
		runs = append(runs, r)
	}
	if len(runs) == 0 {
		return none, runErr
	}
	rep, err := build(runs)
	var md string
	if err == nil {
		md, err = rep.Write(rf.out)
	}
	if runErr != nil {
		if err == nil {
			fmt.Printf("\n%s\nWrote a partial report of the %d runs done to %s.\n", md, len(runs), rf.out)
		}
		return none, errors.Join(runErr, err)
	}
	if err != nil {
		return none, err
	}
	fmt.Printf("\n%s\nWrote %s (report.md, report.json, results and charts) in %s.\n", md, rf.out, time.Since(began).Round(time.Second))
	return rep, nil
}

func prefix(args []string) error {
	o := bench.DefaultPrefix()
	fs := flag.NewFlagSet("hermod-bench prefix", flag.ContinueOnError)
	rf := addRunFlags(fs, "bench-out/prefix")
	fs.Float64Var(&o.Fleet.Speed, "speed", o.Fleet.Speed, "the simulator's speed factor")
	fs.IntVar(&o.Fleet.Pods, "pods", o.Fleet.Pods, "pods in the fleet")
	fs.IntVar(&o.Fleet.Cost.NumGPUBlocks, "kv-blocks", o.Fleet.Cost.NumGPUBlocks, "KV-cache blocks per pod")
	fs.IntVar(&o.Pickers, "pickers", o.Pickers, "picker replicas of each stack")
	fs.IntVar(&o.Workload.Customers, "customers", o.Workload.Customers, "customers, each with a system prompt of its own")
	fs.IntVar(&o.Workload.SystemTokens, "system-tokens", o.Workload.SystemTokens, "tokens of each system prompt")
	fs.IntVar(&o.Workload.PreambleTokens, "preamble-tokens", o.Workload.PreambleTokens, "tokens of the preamble every system prompt starts with (0: none)")
	fs.IntVar(&o.Workload.Turns, "turns", o.Workload.Turns, "requests per customer")
	fs.Float64Var(&o.Workload.Rate, "rate", o.Workload.Rate, "conversations starting per second")
	fs.DurationVar(&o.Workload.ThinkTime, "think-time", o.Workload.ThinkTime, "time between a customer's turns")
	fs.Int64Var(&o.Workload.Seed, "seed", o.Workload.Seed, "the workload's seed")
	rep, err := runCompared(fs, args, rf, func() ([]bench.Spec, error) { return bench.PrefixSpecs(o) },
		"Prefix benchmark: random, load-only, approximate and precise prefix-cache routing", "load-only")
	if err != nil {
		return err
	}
	p90 := byRun(rep, func(row bench.Row) float64 { return row.TTFTP90 })
	if p := p90["precise-prefix"]; p > 0 {
		fmt.Printf("precise-prefix p90 TTFT: %.1fx lower than load-only, %.1fx lower than approx-prefix.\n", p90["load-only"]/p, p90["approx-prefix"]/p)
	}
	return nil
}

func multi(args []string) error {
	o := bench.DefaultMulti()
	fs := flag.NewFlagSet("hermod-bench multi", flag.ContinueOnError)
	rf := addRunFlags(fs, "bench-out/multi")
	fs.Float64Var(&o.Fleet.Speed, "speed", o.Fleet.Speed, "the simulator's speed factor")
	fs.IntVar(&o.Fleet.Pods, "pods", o.Fleet.Pods, "pods in the fleet")
	fs.IntVar(&o.Gateways, "gateways", o.Gateways, "gateway replicas, each with its own picker")
	fs.IntVar(&o.Workload.Requests, "requests", o.Workload.Requests, "requests sent")
	fs.Float64Var(&o.Workload.Rate, "rate", o.Workload.Rate, "mean arrivals per second (simulated; the fleet serves about 1 per pod per second)")
	fs.IntVar(&o.Workload.MaxTokens, "max-tokens", o.Workload.MaxTokens, "output tokens per request (20 ms each)")
	fs.Int64Var(&o.Workload.Seed, "seed", o.Workload.Seed, "the workload's seed")
	fs.IntVar(&o.GoMaxProcs, "gomaxprocs", o.GoMaxProcs, "GOMAXPROCS of every process of the stacks (0: Go's default, the machine's cores)")
	rep, err := runCompared(fs, args, rf, func() ([]bench.Spec, error) { return bench.MultiSpecs(o) },
		"Many gateways: per-gateway least-request against the global views (events, Valkey)", "local-view")
	if err != nil {
		return err
	}
	p99 := byRun(rep, func(row bench.Row) float64 { return row.P99 })
	for _, global := range []string{"events", "valkey"} {
		if p := p99[global]; p > 0 {
			fmt.Printf("%s p99 latency: %.1fx lower than the per-gateway local view.\n", global, p99["local-view"]/p)
		}
	}
	return nil
}

// runCompared parses a comparison benchmark's flags (fs, with its run
// flags rf), runs the specs that specs makes of them, and reports the runs
// against baseline under title.
func runCompared(fs *flag.FlagSet, args []string, rf *runFlags, specs func() ([]bench.Spec, error), title, baseline string) (*bench.Report, error) {
	if err := cmdline.Parse(fs, args); err != nil {
		return nil, err
	}
	if err := rf.validate(); err != nil {
		return nil, err
	}
	s, err := specs()
	if err != nil {
		return nil, err
	}
	binDir, err := rf.resolveBinDir()
	if err != nil {
		return nil, err
	}
	return runAll(s, binDir, rf, func(runs []*bench.RunResult) (*bench.Report, error) {
		return bench.NewReport(title, baseline, runs)
	})
}

// byRun maps each run of the report to a figure of its row.
func byRun(rep *bench.Report, figure func(bench.Row) float64) map[string]float64 {
	m := map[string]float64{}
	for _, row := range rep.Rows {
		m[row.Run] = figure(row)
	}
	return m
}

// runLogged runs one spec with its stack's logs in <out>/<run>/stack.log.
func runLogged(ctx context.Context, binDir, out string, spec bench.Spec, echo bool) (*bench.RunResult, error) {
	dir := filepath.Join(out, spec.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.Create(filepath.Join(dir, "stack.log"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var log io.Writer = f
	if echo {
		log = io.MultiWriter(f, os.Stderr)
	}
	return bench.Run(ctx, bench.Env{BinDir: binDir, Dir: out, StackLog: log, Progress: os.Stderr}, spec)
}

func report(args []string) error {
	fs := flag.NewFlagSet("hermod-bench report", flag.ContinueOnError)
	out := fs.String("out", "bench-out/report", "directory of the report")
	title := fs.String("title", "Routing benchmark", "the report's title")
	baseline := fs.String("baseline", "", "the run the others are compared to (default: the first)")
	recommended := fs.String("recommended", "predicted-latency", "routing benchmark results: the policy the targets are about")
	if err := cmdline.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return errors.New("report: results files required")
	}
	var runs []*bench.RunResult
	for _, path := range fs.Args() {
		r, err := bench.ReadResult(path)
		if err != nil {
			return err
		}
		runs = append(runs, r)
	}
	var rep reporter
	var err error
	if !slices.ContainsFunc(runs, func(r *bench.RunResult) bool { return r.Router == nil }) {
		rep, err = bench.NewPeersReport(*title, runs)
	} else if slices.ContainsFunc(runs, func(r *bench.RunResult) bool { return r.Spec.Scenario != "" }) {
		rep, err = bench.NewRoutingReport(*title, *recommended, runs)
	} else {
		rep, err = bench.NewReport(*title, *baseline, runs)
	}
	if err != nil {
		return err
	}
	md, err := rep.Write(*out)
	if err != nil {
		return err
	}
	fmt.Print(md)
	return nil
}

// runFlags are the flags every benchmark run takes.
type runFlags struct {
	out, binDir string
	stackLog    bool
	// noisy is the noisy neighbour's threads.
	noisy int
}

// addRunFlags defines --out (default out), --bin-dir, --stack-logs and
// --noisy-neighbour on fs.
func addRunFlags(fs *flag.FlagSet, out string) *runFlags {
	rf := &runFlags{}
	fs.StringVar(&rf.out, "out", out, "directory of the results, charts and report")
	fs.StringVar(&rf.binDir, "bin-dir", "", "directory of hermod-devstack and the binaries it runs (default: this binary's)")
	fs.BoolVar(&rf.stackLog, "stack-logs", false, "also print the stacks' logs (they always go to <out>/<run>/stack.log)")
	fs.IntVar(&rf.noisy, "noisy-neighbour", 0, "CPU-burning threads beside every stack for its whole run, so that the control plane competes for the cores as on a busy node (0: none)")
	return rf
}

func (rf *runFlags) validate() error {
	if err := bench.CheckNoisyNeighbour(rf.noisy); err != nil {
		return fmt.Errorf("--noisy-neighbour: %w", err)
	}
	return nil
}

// resolveBinDir is --bin-dir, by default this binary's directory.
func (rf *runFlags) resolveBinDir() (string, error) {
	if rf.binDir != "" {
		return rf.binDir, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("--bin-dir: %w", err)
	}
	return filepath.Dir(exe), nil
}
