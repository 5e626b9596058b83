package e2e

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/hermod/hermod/tools/loadgen/bench"
	"github.com/hermod/hermod/tools/loadgen/workload"
)

// smallReference is the reference command's workload cut to 48 requests:
// 12 heavy seeds (three of each kind) at once, then a burst of 36 with an
// inline heavy after every 11.
func smallReference() workload.ReferenceOptions {
	o := workload.ReferenceCommand()
	o.Total, o.HeavySeeds, o.InlineEvery = 48, 12, 11
	return o
}

// The benchmark's results are simulated times, so the simulator's speed
// factor changes how long a run takes, not what it measures: the same
// workload on the same fleet at speeds 10 and 20 finishes in the same
// simulated time and sees the same latencies, within noise.
func TestBenchResultsDoNotDependOnSpeed(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole stack twice; skipped with -short")
	}
	w, err := workload.Reference(smallReference())
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := bench.Config("load-aware")
	if err != nil {
		t.Fatal(err)
	}
	env := bench.Env{BinDir: binDir, Dir: t.TempDir()}
	// Two stacks on two cores: a busy moment slows one run's processes
	// and shows as a difference. A second pair decides then; the property
	// fails only if neither pair agrees.
	var runs []*bench.RunResult
	for attempt := 1; attempt <= 2; attempt++ {
		runs = runs[:0]
		for _, speed := range []float64{10, 20} {
			f := bench.RoutingFleet()
			f.Speed = speed
			spec := bench.Spec{
				Name: "speed-" + fmtFloat(speed), Stack: bench.Stack{Policy: "load-aware", Config: cfg, Pickers: 1},
				Fleet: f, Workload: w, SendGap: bench.DefaultRouting().SendGap,
			}
			r, err := bench.Run(context.Background(), env, spec)
			if err != nil {
				t.Fatal(err)
			}
			if s := r.Results.Summary; s.Failed != 0 || s.Count != len(w.Requests) {
				t.Fatalf("speed %v: %d ok, %d failed", speed, s.Count, s.Failed)
			}
			runs = append(runs, r)
		}
		a, b := runs[0].Results.Summary, runs[1].Results.Summary
		t.Logf("attempt %d: speed 10: total %.1fs avg %.2fs p50 %.2fs; speed 20: total %.1fs avg %.2fs p50 %.2fs", attempt, a.TotalE2E, a.Avg, a.P50, b.TotalE2E, b.Avg, b.P50)
		var diffs []string
		for _, c := range []struct {
			what string
			x, y float64
		}{{"total wall-clock", a.TotalE2E, b.TotalE2E}, {"average latency", a.Avg, b.Avg}} {
			if d := math.Abs(c.x-c.y) / math.Max(c.x, c.y); d > 0.10 {
				diffs = append(diffs, fmt.Sprintf("%s differs by %.1f%% between speeds 10 and 20 (%.2fs, %.2fs)", c.what, 100*d, c.x, c.y))
			}
		}
		if len(diffs) == 0 {
			break
		}
		if attempt == 2 {
			for _, d := range diffs {
				t.Error(d)
			}
		}
	}
	a := runs[0].Results.Summary
	// the bound is a property of the workload and fleet, not of the speed
	if runs[0].Bound != runs[1].Bound || a.TotalE2E < runs[0].Bound.Total {
		t.Errorf("bounds %+v and %+v; total %.1fs", runs[0].Bound, runs[1].Bound, a.TotalE2E)
	}
	rep, err := bench.NewReport("speed", runs[0].Spec.Name, runs)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rep.Write(env.Dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(env.Dir, "queue-speed-20.png")); err != nil {
		t.Fatal(err)
	}
}

func fmtFloat(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// round-robin-picker through the real stack with two picker replicas
// behind one gateway: each replica folds the other's decisions from the
// decision stream, so sequential requests go to the pods in strict
// rotation whichever replica picks.
func TestRoundRobinAcrossPickerReplicas(t *testing.T) {
	cfg, err := bench.Config("round-robin")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "round-robin.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startStack(t, "--pods", "3", "--slow-pods", "0", "--pickers", "2", "--speed", "10", "--config", path)
	var served []string
	for i := range 12 {
		r := s.send(context.Background(), "/v1/completions", fmt.Sprintf(`{"model":%q,"prompt":"request %d","max_tokens":4}`, s.state.Model, i), false)
		if !r.ok() {
			t.Fatalf("request %d: %d %v %s", i, r.status, r.err, r.body)
		}
		served = append(served, r.servedBy)
		// the decision reaches the other replica in about a millisecond;
		// leave it more on a loaded machine
		time.Sleep(100 * time.Millisecond)
	}
	for i := 3; i < len(served); i++ {
		if served[i] != served[i-3] {
			t.Fatalf("not a rotation over 3 pods: %v", served)
		}
	}
	if served[0] == served[1] || served[1] == served[2] || served[0] == served[2] {
		t.Fatalf("not a rotation over 3 pods: %v", served)
	}
}
