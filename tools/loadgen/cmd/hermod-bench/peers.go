package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/hermod/hermod/libs/cmdline"
	"github.com/hermod/hermod/tools/loadgen/bench"
)

// errNoPeer says how to get the peer.
var errNoPeer = errors.New(`peers: no llm-d router to run beside Hermod. Give one of
  --epp PATH         (or LLMD_EPP) an EPP binary built from llm-d/llm-d-router's cmd/epp
  --llmd-src DIR     (or LLMD_ROUTER_SRC) a checkout of llm-d/llm-d-router: the EPP is built from it
                     (CGO_ENABLED=0 GOFLAGS=-mod=mod go build ./cmd/epp, about 3 minutes; its
                     dependencies come from the Go module proxy) and its test/perf router configs are used
e.g. git clone https://github.com/llm-d/llm-d-router && make bench-peers LLMD_ROUTER_SRC=$PWD/llm-d-router`)

// peersCmd is a parsed hermod-bench peers command line.
type peersCmd struct {
	opts bench.PeersOptions
	run  *runFlags
	epp  string
	src  string
}

func parsePeers(args []string, output io.Writer) (*peersCmd, error) {
	c := &peersCmd{opts: bench.DefaultPeers()}
	o := &c.opts
	fs := flag.NewFlagSet("hermod-bench peers", flag.ContinueOnError)
	fs.SetOutput(output)
	c.run = addRunFlags(fs, "bench-out/peers")
	fs.StringVar(&c.epp, "epp", os.Getenv("LLMD_EPP"), "the llm-d router's EPP binary (default $LLMD_EPP)")
	fs.StringVar(&c.src, "llmd-src", os.Getenv("LLMD_ROUTER_SRC"), "a checkout of llm-d/llm-d-router: its test/perf router configs, and its EPP when --epp is not given (default $LLMD_ROUTER_SRC)")
	fs.Float64Var(&o.Routing.Fleet.Speed, "speed", o.Routing.Fleet.Speed, "the simulator's speed factor (simulated seconds per wall-clock second)")
	fs.IntVar(&o.Routing.Orders, "orders", o.Routing.Orders, "arrival orders per fleet, config and router: the figures' ranges are over them")
	fs.IntVar(&o.Routing.Workload.Total, "total", o.Routing.Workload.Total, "requests in the reference workload")
	fs.IntVar(&o.Routing.Hetero.Workload.Requests, "hetero-requests", o.Routing.Hetero.Workload.Requests, "requests of the hetero fleet's mixed workload")
	fs.IntVar(&o.Routing.Warmup, "warmup", o.Routing.Warmup, "requests every run sends (and leaves out of its results) before its workload")
	var fleets, shared, hermodOnly cmdline.List
	fs.Var(&fleets, "fleets", "fleet scenarios, comma-separated (default "+strings.Join(bench.Scenarios, ",")+")")
	fs.Var(&shared, "configs", "configs both routers run, comma-separated (default "+strings.Join(o.Shared, ",")+")")
	fs.Var(&hermodOnly, "hermod-configs", "configs only Hermod runs, comma-separated (default "+strings.Join(o.HermodOnly, ",")+")")
	if err := cmdline.Parse(fs, args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	if len(fleets) > 0 {
		o.Routing.Fleets = fleets
	}
	if len(shared) > 0 {
		o.Shared = shared
	}
	if len(hermodOnly) > 0 {
		o.HermodOnly = hermodOnly
	}
	if c.epp == "" && c.src == "" {
		return nil, errNoPeer
	}
	if err := c.run.validate(); err != nil {
		return nil, err
	}
	return c, nil
}

func peers(args []string) error {
	c, err := parsePeers(args, os.Stderr)
	if err != nil {
		return err
	}
	binDir, err := c.run.resolveBinDir()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(c.run.out, 0o755); err != nil {
		return err
	}
	o := &c.opts
	o.Src = c.src
	if o.Peer, err = peerRouter(c.epp, c.src, c.run.out); err != nil {
		return err
	}
	specs, err := bench.PeersSpecs(*o)
	if err != nil {
		return err
	}
	if err := bench.CheckDevstack(binDir, specs); err != nil {
		return err
	}
	fmt.Printf("Peers benchmark: %s (%s) beside Hermod's picker, fleets %s x %d orders, configs %s on both and %s on Hermod = %d runs.\n",
		o.Peer.EPP, o.Peer.Source, strings.Join(o.Routing.Fleets, ", "), o.Routing.Orders, strings.Join(o.Shared, ", "), strings.Join(o.HermodOnly, ", "), len(specs))
	_, err = runAll(specs, binDir, c.run, func(runs []*bench.RunResult) (*bench.PeersReport, error) {
		return bench.NewPeersReport("Hermod beside the llm-d router", runs)
	})
	return err
}

// peerRouter is the peer to run: epp, or the EPP built from src into
// out; its source is src's commit when src is a git checkout.
func peerRouter(epp, src, out string) (bench.Router, error) {
	r := bench.Router{Kind: bench.RouterLLMD, EPP: epp}
	if src != "" {
		r.Source = "llm-d-router checkout " + src
		if commit, err := exec.Command("git", "-C", src, "rev-parse", "--short=12", "HEAD").Output(); err == nil {
			r.Source = "llm-d/llm-d-router@" + strings.TrimSpace(string(commit))
		}
	}
	if epp != "" {
		if _, err := os.Stat(epp); err != nil {
			return r, fmt.Errorf("--epp: %w", err)
		}
		if r.Source == "" {
			r.Source = "binary " + epp
		}
		return r, nil
	}
	bin, err := filepath.Abs(filepath.Join(out, "llm-d-epp"))
	if err != nil {
		return r, err
	}
	fmt.Printf("Building the llm-d router's EPP from %s into %s (about 3 minutes the first time) ...\n", src, bin)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/epp")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-mod=mod", "GOWORK=off")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return r, fmt.Errorf("build the EPP in %s: %w", src, err)
	}
	r.EPP = bin
	return r, nil
}
