package bench

import (
	"context"
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
	dir := filepath.Join(env.Dir, spec.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("run %s: %w", spec.Name, err)
	}
	st, err := startStack(ctx, env.BinDir, dir, &spec, env.StackLog)
	if err != nil {
		return nil, fmt.Errorf("run %s: %w", spec.Name, err)
	}
	pods := make([]runner.Pod, len(st.state.Pods))
	for i, p := range st.state.Pods {
		pods[i] = runner.Pod{Name: p.Name, Address: p.Address}
	}
	if env.Progress != nil {
		fmt.Fprintf(env.Progress, "run %s: %s routing, %d pods, speed %g, %d requests\n", spec.Name, spec.Stack.Policy, spec.Fleet.Pods, spec.Fleet.Speed, len(spec.Workload.Requests))
	}
	res, runErr := runner.Run(ctx, spec.Workload, runner.Options{
		BaseURL: "http://" + st.state.Gateway, MoreBaseURLs: moreGateways(st.state.Gateways), Model: spec.Fleet.Model, Stream: spec.Stream,
		Speed: spec.Fleet.Speed, Timeout: spec.Timeout, SendGap: spec.SendGap, Pods: pods, SampleInterval: spec.SampleInterval,
		Progress: env.Progress,
	})
	var lag *DecisionLag
	if runErr == nil && len(st.state.Pickers) > 1 {
		var err error
		if lag, err = scrapeDecisionLag(ctx, st.state.Pickers); err != nil && env.Progress != nil {
			fmt.Fprintf(env.Progress, "run %s: %v\n", spec.Name, err)
		}
	}
	stopErr := st.stop()
	if runErr != nil {
		return nil, fmt.Errorf("run %s: %w", spec.Name, runErr)
	}
	if stopErr != nil {
		return nil, fmt.Errorf("run %s: %w", spec.Name, stopErr)
	}
	out := &RunResult{Spec: spec, Bound: IdealBound(spec.Workload, spec.Fleet), Results: res, Wall: time.Since(began), DecisionLag: lag}
	if env.Progress != nil {
		res.PrintSummary(env.Progress)
		if lag != nil {
			fmt.Fprintf(env.Progress, "decisions reached the other pickers in p50 %.2f ms, p99 %.2f ms (wall, %d folds)\n", 1e3*lag.P50, 1e3*lag.P99, lag.Count)
		}
	}
	return out, nil
}

// moreGateways are the base URLs of the gateways after the first.
func moreGateways(all []string) []string {
	var out []string
	for i, g := range all {
		if i > 0 {
			out = append(out, "http://"+g)
		}
	}
	return out
}
