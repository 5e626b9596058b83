// Command vllm-sim simulates vLLM model servers: the OpenAI API, vLLM's
// Prometheus metrics and its ZeroMQ KV-cache events, driven by an engine
// model with continuous batching, chunked prefill and prefix caching in
// simulated time. It takes vLLM's command line:
//
//	vllm-sim serve meta-llama/Llama-3.1-8B-Instruct --port 8000 --max-num-seqs 256
//
// plus simulator flags (--speed, --pods, --pod-speed, the cost model, ...).
// Run vllm-sim -h for all of them.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/hermod/hermod/libs/cmdline"
	"github.com/hermod/hermod/libs/telemetry"
	"github.com/hermod/hermod/tools/vllm-sim/internal/cli"
	"github.com/hermod/hermod/tools/vllm-sim/internal/fleet"
)

func main() {
	os.Exit(run())
}

func run() int {
	if cmdline.PrintVersion("vllm-sim", os.Args[1:], os.Stdout) {
		return 0
	}
	opts, err := cli.Parse(os.Args[1:], os.Stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(os.Stderr, "vllm-sim:", err)
		return 2
	}
	log, err := telemetry.NewLogger(os.Stderr, telemetry.LogFormat(opts.LogFormat), opts.Verbosity)
	if err != nil {
		fmt.Fprintln(os.Stderr, "vllm-sim:", err)
		return 2
	}
	slog.SetDefault(log)
	if len(opts.IgnoredFlags) > 0 {
		log.Info("vLLM flags without effect in the simulator", "flags", opts.IgnoredFlags)
	}
	f, err := fleet.New(opts, log)
	if err != nil {
		log.Error("starting the simulator failed", "error", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log.Info("vllm-sim starting", "model", opts.Model, "served_model_names", opts.ServedNames, "pods", opts.Pods, "speed", opts.Speed)
	if err := f.Run(ctx); err != nil {
		log.Error("the simulator stopped", "error", err)
		return 1
	}
	return 0
}
