package bench

import (
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hermod/hermod/tools/loadgen/runner"
	"github.com/hermod/hermod/tools/loadgen/workload"
)

func fakeRun(name string, total float64, pods map[string]int) *RunResult {
	w := &workload.Workload{Name: "toy", Requests: []workload.Request{{ID: "a", MaxTokens: 1, At: time.Second}}}
	res := &runner.Results{Workload: "toy", Speed: 10}
	for pod, n := range pods {
		for range n {
			res.Requests = append(res.Requests, runner.Result{ID: "a", Status: 200, Latency: total / 2, Pod: pod})
		}
		res.Queues = append(res.Queues, runner.QueueSeries{Pod: pod, Samples: []runner.QueueSample{{T: 0}, {T: total / 2, Waiting: float64(n)}, {T: total}}})
	}
	res.Summary = runner.Summarize(res.Requests, total)
	return &RunResult{
		Spec:    Spec{Name: name, Stack: Stack{Policy: name, Config: "x", Pickers: 1}, Fleet: RoutingFleet(), Workload: w},
		Bound:   Bound{Total: 80, Work: 320, Capacity: 4, FleetLimit: 80, RequestLimit: 20, RequestLimitID: "a"},
		Results: res,
	}
}

func TestReportComparesRunsAndWritesChartsAndResults(t *testing.T) {
	rr := fakeRun("round-robin", 120, map[string]int{"pod-0": 2, "pod-1": 2})
	la := fakeRun("load-aware", 90, map[string]int{"pod-0": 3, "pod-1": 1})
	r, err := NewReport("Routing", "round-robin", []*RunResult{rr, la})
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Rows[1]; !near(got.VsBaseline, 0.25) || !near(got.OverBound, 90.0/80-1) || got.Count != 4 || got.PerPod["pod-0"] != 3 {
		t.Fatalf("load-aware row %+v", got)
	}
	if r.Rows[0].VsBaseline != 0 {
		t.Fatalf("baseline row %+v", r.Rows[0])
	}
	dir := t.TempDir()
	md, err := r.Write(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| round-robin | 120.0 s | — |", "| load-aware | 90.0 s | 25.0% sooner | +12.5% |", "Ideal lower bound: 80.0 s", "![load-aware](queue-load-aware.png)", "- load-aware: pod-0 3, pod-1 1"} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	for _, name := range []string{"queue-round-robin.png", "queue-load-aware.png"} {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := png.Decode(f); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		_ = f.Close()
	}
	back, err := ReadResult(filepath.Join(dir, "results-load-aware.json"))
	if err != nil || back.Results.Summary.TotalE2E != 90 || back.Spec.Workload.Name != "toy" || back.Bound.Total != 80 {
		t.Fatalf("results read back: %+v, %v", back, err)
	}
	if _, err := NewReport("x", "nope", []*RunResult{rr}); err == nil {
		t.Fatal("a missing baseline was accepted")
	}
	if _, err := ReadResult(filepath.Join(dir, "report.md")); err == nil {
		t.Fatal("a markdown file read as results")
	}
}
