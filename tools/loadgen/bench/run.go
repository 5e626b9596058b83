package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/hermod/hermod/tools/loadgen/runner"
)

// Env is where runs happen.
type Env struct {
	// BinDir holds hermod-devstack and the binaries it starts.
	BinDir string
	// Dir receives each run's files (a directory per run).
	Dir string
	// StackLog, if set, receives the stacks' logs.
	StackLog io.Writer
	// Progress, if set, receives progress bars and summaries.
	Progress io.Writer
}

// RunResult is a finished run: what results JSON files hold.
type RunResult struct {
	Spec    Spec            `json:"spec"`
	Bound   Bound           `json:"bound"`
	Results *runner.Results `json:"results"`
	// Wall is how long the run took on the wall clock, stack start and
	// stop included.
	Wall time.Duration `json:"wall"`
	// DecisionLag is how long decisions took to reach the other pickers,
	// when there were several folding each other's (nil otherwise).
	DecisionLag *DecisionLag `json:"decision_lag,omitempty"`
	// LoadStart and LoadEnd are the machine's load average when the run
	// began (before its stack started) and when its workload was done
	// (nil where the machine does not tell).
	LoadStart *LoadAvg `json:"load_start,omitempty"`
	LoadEnd   *LoadAvg `json:"load_end,omitempty"`
	// PredictionError is how far a latency predictor's predictions
	// (predicted-latency-scorer) were from what the workload's requests
	// showed, by kind: ttft, tpot (streamed requests), e2e (unstreamed).
	// Nil when no predictor ran.
	PredictionError map[string]*PredictionError `json:"prediction_error,omitempty"`
	// Router is what the picker behind the ext_proc front cost and how
	// fast it decided (runs with a Router; nil through the gateway).
	Router *RouterStats `json:"router,omitempty"`
}

// Run starts a stack for spec, sends its workload, stops the stack and
// returns the results.
func Run(ctx context.Context, env Env, spec Spec) (*RunResult, error) {
	if err := spec.validate(); err != nil {
		return nil, err
	}
	if spec.SampleInterval <= 0 {
		spec.SampleInterval = time.Second
	}
	if spec.Timeout <= 0 {
		spec.Timeout = 10000 * time.Second
	}
	began := time.Now()
	loadStart := readLoadAvg()
	dir := filepath.Join(env.Dir, spec.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("run %s: %w", spec.Name, err)
	}
	nz := startNoise(spec.NoisyNeighbour)
	defer nz.Stop()
	st, err := startStack(ctx, env.BinDir, dir, &spec, env.StackLog)
	if err != nil {
		return nil, fmt.Errorf("run %s: %w", spec.Name, err)
	}
	if err := st.checkSpeeds(spec.Fleet); err != nil {
		return nil, errors.Join(fmt.Errorf("run %s: %w", spec.Name, err), st.stop())
	}
	pods := make([]runner.Pod, len(st.state.Pods))
	for i, p := range st.state.Pods {
		pods[i] = runner.Pod{Name: p.Name, Address: p.Address}
	}
	if env.Progress != nil {
		noisy := ""
		if n := spec.NoisyNeighbour; n > 0 {
			noisy = ", a noisy neighbour burning " + threads(n)
		}
		fmt.Fprintf(env.Progress, "run %s: %s routing, %d pods at speeds %s, simulator speed %g, %d requests (%s)%s\n",
			spec.Name, spec.Stack.Policy, spec.Fleet.Pods, spec.Fleet.SpeedList(), spec.Fleet.Speed, len(spec.Workload.Requests), spec.Workload.Name, noisy)
	}
	base, more := st.state.APIScheme()+"://"+st.state.Gateway, moreGateways(st.state.APIScheme(), st.state.Gateways)
	var rt *routed
	if spec.Router.Kind != RouterGateway {
		if rt, err = startRouter(ctx, dir, &spec, st, env.StackLog); err != nil {
			return nil, errors.Join(fmt.Errorf("run %s: %w", spec.Name, err), st.stop())
		}
		base, more = rt.url, nil
	}
	stopAll := func() error {
		var errs []error
		if rt != nil {
			errs = append(errs, rt.stop())
		}
		return errors.Join(append(errs, st.stop())...)
	}
	if spec.Warmup != nil {
		if err := warmUp(ctx, env, spec, base, more); err != nil {
			return nil, errors.Join(fmt.Errorf("run %s: %w", spec.Name, err), stopAll())
		}
	}
	if rt != nil {
		if err := rt.begin(ctx); err != nil {
			return nil, errors.Join(fmt.Errorf("run %s: %w", spec.Name, err), stopAll())
		}
	}
	before, _ := scrapePredictionErrors(ctx, st.state.Pickers)
	res, runErr := runner.Run(ctx, spec.Workload, runner.Options{
		BaseURL: base, MoreBaseURLs: more, Model: spec.Fleet.Model, Stream: spec.Stream,
		Speed: spec.Fleet.Speed, Timeout: spec.Timeout, SendGap: spec.SendGap, Pods: pods, SampleInterval: spec.SampleInterval,
		Progress: env.Progress,
	})
	var routerStats *RouterStats
	if rt != nil && runErr == nil {
		if routerStats, err = rt.stats(len(spec.Workload.Requests)); err != nil {
			runErr = err
		}
	}
	loadEnd := readLoadAvg()
	var lag *DecisionLag
	if runErr == nil && len(st.state.Pickers) > 1 {
		var err error
		if lag, err = scrapeDecisionLag(ctx, st.state.Pickers); err != nil && env.Progress != nil {
			fmt.Fprintf(env.Progress, "run %s: %v\n", spec.Name, err)
		}
	}
	var predErr map[string]*PredictionError
	if runErr == nil && before != nil {
		if after, err := scrapePredictionErrors(ctx, st.state.Pickers); err == nil {
			if pe := after.since(before); len(pe) > 0 {
				predErr = pe
			}
		} else if env.Progress != nil {
			fmt.Fprintf(env.Progress, "run %s: %v\n", spec.Name, err)
		}
	}
	stopErr := stopAll()
	if runErr != nil {
		return nil, fmt.Errorf("run %s: %w", spec.Name, runErr)
	}
	if stopErr != nil {
		return nil, fmt.Errorf("run %s: %w", spec.Name, stopErr)
	}
	out := &RunResult{
		Spec: spec, Bound: IdealBound(spec.Workload, spec.Fleet), Results: res, Wall: time.Since(began), DecisionLag: lag,
		LoadStart: loadStart, LoadEnd: loadEnd, PredictionError: predErr, Router: routerStats,
	}
	if env.Progress != nil {
		res.PrintSummary(env.Progress)
		if lag != nil {
			fmt.Fprintf(env.Progress, "decisions reached the other pickers in p50 %.2f ms, p99 %.2f ms (wall, %d folds)\n", 1e3*lag.P50, 1e3*lag.P99, lag.Count)
		}
		if r := routerStats; r != nil {
			fmt.Fprintf(env.Progress, "%s: decisions p50 %.2f ms, p99 %.2f ms; %.0f µs of CPU per request (%.0f above its idle %.3f cores), peak RSS %.0f MiB\n",
				r.Process, 1e3*r.DecisionP50, 1e3*r.DecisionP99, 1e6*r.CPUPerRequest, 1e6*r.BusyPerRequest, r.IdleCores, float64(r.PeakRSS)/(1<<20))
		}
		for _, kind := range predictionKinds {
			if pe := predErr[kind]; pe != nil {
				fmt.Fprintf(env.Progress, "%s predictions: median absolute error %.1f%%, p90 %.1f%% (%d requests)\n", kind, 100*pe.P50, 100*pe.P90, pe.Count)
			}
		}
	}
	return out, nil
}

// warmUp sends the spec's warm-up workload and waits for its answers; a
// request that fails fails the run (the stack is not what it should be).
func warmUp(ctx context.Context, env Env, spec Spec, base string, more []string) error {
	began := time.Now()
	res, err := runner.Run(ctx, spec.Warmup, runner.Options{
		BaseURL: base, MoreBaseURLs: more, Model: spec.Fleet.Model, Stream: spec.Stream,
		Speed: spec.Fleet.Speed, Timeout: spec.Timeout, SendGap: spec.SendGap,
	})
	if err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	if n := res.Summary.Failed; n > 0 {
		return fmt.Errorf("warm-up: %d of %d requests failed", n, len(spec.Warmup.Requests))
	}
	if env.Progress != nil {
		fmt.Fprintf(env.Progress, "run %s: warmed up with %d requests in %s\n", spec.Name, len(spec.Warmup.Requests), time.Since(began).Round(time.Millisecond))
	}
	return nil
}

// moreGateways are the base URLs of the gateways after the first.
func moreGateways(scheme string, all []string) []string {
	var out []string
	for i, g := range all {
		if i > 0 {
			out = append(out, scheme+"://"+g)
		}
	}
	return out
}
