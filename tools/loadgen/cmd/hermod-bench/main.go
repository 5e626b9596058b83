// Command hermod-bench runs Hermod's routing benchmarks: each run starts
// its own stack (hermod-devstack) on a seeded vllm-sim fleet, sends a
// workload and records the results; a report compares the runs.
//
//	hermod-bench routing [flags]          round-robin against load-aware (make bench)
//	hermod-bench prefix [flags]           random, load-only, approximate and precise prefix (make bench-prefix)
//	hermod-bench multi [flags]            4 gateways: per-gateway least-request, events and Valkey global views (make bench-multi)
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
	"time"

	"github.com/hermod/hermod/libs/cmdline"
	"github.com/hermod/hermod/tools/loadgen/bench"
)

func main() { cmdline.Main("hermod-bench", run) }

const usage = `Usage:
  hermod-bench routing [flags]           round-robin against load-aware on reference/000's workload
  hermod-bench prefix [flags]            random, load-only, approximate and precise prefix routing on shared prefixes
  hermod-bench multi [flags]             many gateways: per-gateway least-request against the global views (events, Valkey)
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
	case "report":
		return report(os.Args[2:])
	case "-h", "--help", "help":
		fmt.Print(usage)
		return nil
	}
	fmt.Fprint(os.Stderr, usage)
	return fmt.Errorf("unknown subcommand %q", os.Args[1])
}

func routing(args []string) error {
	o := bench.DefaultRouting()
	fs := flag.NewFlagSet("hermod-bench routing", flag.ContinueOnError)
	rf := addRunFlags(fs, "bench-out/routing")
	fs.Float64Var(&o.Fleet.Speed, "speed", o.Fleet.Speed, "the simulator's speed factor (simulated seconds per wall-clock second)")
	fs.IntVar(&o.Fleet.Pods, "pods", o.Fleet.Pods, "pods in the fleet")
	fs.IntVar(&o.Fleet.SlowPods, "slow-pods", o.Fleet.SlowPods, "pods running at --slow-speed")
	fs.Float64Var(&o.Fleet.SlowSpeed, "slow-speed", 0.5, "speed factor of the slow pods")
	fs.Int64Var(&o.Fleet.Seed, "sim-seed", o.Fleet.Seed, "the simulator's seed")
	fs.IntVar(&o.Pickers, "pickers", o.Pickers, "picker replicas of each stack")
	fs.BoolVar(&o.Stream, "stream", o.Stream, "send streaming requests")
	fs.DurationVar(&o.SendGap, "send-gap", o.SendGap, "least simulated time between two sends (requests due at once leave in order, this far apart)")
	fs.IntVar(&o.Workload.Total, "total", o.Workload.Total, "requests in the workload")
	fs.IntVar(&o.Workload.HeavySeeds, "heavy-seeds", o.Workload.HeavySeeds, "heavy requests sent first")
	fs.Int64Var(&o.Workload.Seed, "seed", o.Workload.Seed, "the workload's seed (42 is the reference's)")
	if err := cmdline.Parse(fs, args); err != nil {
		return err
	}
	specs, err := bench.RoutingSpecs(o)
	if err != nil {
		return err
	}
	_, err = runAll(specs, rf.binDir, rf.out, rf.stackLog, "Routing benchmark: round-robin against load-aware (reference/000)", "round-robin")
	return err
}

// runAll runs the specs one after the other and writes their report.
func runAll(specs []bench.Spec, binDir, out string, stackLog bool, title, baseline string) (*bench.Report, error) {
	if binDir == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("--bin-dir: %w", err)
		}
		binDir = filepath.Dir(exe)
	}
	ctx, stop := cmdline.SignalContext(context.Background())
	defer stop()
	began := time.Now()
	var runs []*bench.RunResult
	for _, spec := range specs {
		r, err := runLogged(ctx, binDir, out, spec, stackLog)
		if err != nil {
			return nil, err
		}
		runs = append(runs, r)
	}
	rep, err := bench.NewReport(title, baseline, runs)
	if err != nil {
		return nil, err
	}
	md, err := rep.Write(out)
	if err != nil {
		return nil, err
	}
	fmt.Printf("\n%s\nWrote %s (report.md, report.json, results and charts) in %s.\n", md, out, time.Since(began).Round(time.Second))
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
	if err := cmdline.Parse(fs, args); err != nil {
		return err
	}
	specs, err := bench.PrefixSpecs(o)
	if err != nil {
		return err
	}
	rep, err := runAll(specs, rf.binDir, rf.out, rf.stackLog, "Prefix benchmark: random, load-only, approximate and precise prefix-cache routing", "load-only")
	if err != nil {
		return err
	}
	p90 := map[string]float64{}
	for _, row := range rep.Rows {
		p90[row.Run] = row.TTFTP90
	}
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
	if err := cmdline.Parse(fs, args); err != nil {
		return err
	}
	specs, err := bench.MultiSpecs(o)
	if err != nil {
		return err
	}
	rep, err := runAll(specs, rf.binDir, rf.out, rf.stackLog, "Many gateways: per-gateway least-request against the global views (events, Valkey)", "local-view")
	if err != nil {
		return err
	}
	p99 := map[string]float64{}
	for _, row := range rep.Rows {
		p99[row.Run] = row.P99
	}
	for _, global := range []string{"events", "valkey"} {
		if p := p99[global]; p > 0 {
			fmt.Printf("%s p99 latency: %.1fx lower than the per-gateway local view.\n", global, p99["local-view"]/p)
		}
	}
	return nil
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
	rep, err := bench.NewReport(*title, *baseline, runs)
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
}

// addRunFlags defines --out (default out), --bin-dir and --stack-logs on fs.
func addRunFlags(fs *flag.FlagSet, out string) *runFlags {
	rf := &runFlags{}
	fs.StringVar(&rf.out, "out", out, "directory of the results, charts and report")
	fs.StringVar(&rf.binDir, "bin-dir", "", "directory of hermod-devstack and the binaries it runs (default: this binary's)")
	fs.BoolVar(&rf.stackLog, "stack-logs", false, "also print the stacks' logs (they always go to <out>/<run>/stack.log)")
	return rf
}
