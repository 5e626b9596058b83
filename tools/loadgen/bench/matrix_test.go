package bench

import (
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hermod/hermod/tools/loadgen/runner"
	"github.com/hermod/hermod/tools/loadgen/workload"
)

// matrixRun is a synthetic run of the routing benchmark: its total time,
// p90 (the latencies are all p90) and ideal bound.
func matrixRun(scenario, policy string, order int, total, p90, bound float64) *RunResult {
	w := &workload.Workload{Name: "toy", Requests: []workload.Request{{ID: "a", MaxTokens: 1}}}
	res := &runner.Results{Workload: "toy", Speed: 10}
	for _, pod := range []string{"pod-0", "pod-1"} {
		res.Requests = append(res.Requests, runner.Result{ID: "a", Status: 200, Latency: p90, Pod: pod})
		res.Queues = append(res.Queues, runner.QueueSeries{Pod: pod, Samples: []runner.QueueSample{{T: 0}, {T: total / 2, Waiting: 3}, {T: total}}})
	}
	res.Summary = runner.Summarize(res.Requests, total)
	f := RoutingFleet()
	if scenario == ScenarioSlow {
		f = SlowFleet(f)
	}
	load := LoadAvg{1.5, 1.2, 1}
	return &RunResult{
		Spec: Spec{
			Name: scenario + "-" + policy + "-o" + string(rune('0'+order)), Scenario: scenario, Order: order,
			Stack: Stack{Policy: policy, Config: "x", Pickers: 1}, Fleet: f, Workload: w, NoisyNeighbour: 2,
		},
		Bound:   Bound{Total: bound, Work: 4 * bound, Capacity: 4, FleetLimit: bound},
		Results: res, LoadStart: &load, LoadEnd: &load,
	}
}

func target(t *testing.T, targets []Target, id, scenario string) Target {
	t.Helper()
	for _, tg := range targets {
		if tg.ID == id && tg.Scenario == scenario {
			return tg
		}
	}
	t.Fatalf("no target (%s) for %s in %+v", id, scenario, targets)
	return Target{}
}

func TestRoutingReportAggregatesOrders(t *testing.T) {
	runs := []*RunResult{
		// identical: three orders
		matrixRun(ScenarioIdentical, "round-robin", 0, 600, 500, 270),
		matrixRun(ScenarioIdentical, "load-aware", 0, 310, 280, 270),
		matrixRun(ScenarioIdentical, "predicted-latency", 0, 280, 250, 270),
		matrixRun(ScenarioIdentical, "round-robin", 1, 500, 450, 280),
		matrixRun(ScenarioIdentical, "load-aware", 1, 330, 300, 280),
		matrixRun(ScenarioIdentical, "predicted-latency", 1, 300, 260, 280),
		matrixRun(ScenarioIdentical, "round-robin", 2, 400, 350, 275),
		matrixRun(ScenarioIdentical, "load-aware", 2, 320, 290, 275),
		matrixRun(ScenarioIdentical, "predicted-latency", 2, 290, 255, 275),
	}
	// runs read back from files come in any order
	shuffled := slices.Clone(runs)
	slices.Reverse(shuffled)
	r, err := NewRoutingReport("Routing", "predicted-latency", shuffled)
	if err != nil {
		t.Fatal(err)
	}
	for i, run := range r.Runs {
		if run != runs[i] {
			t.Fatalf("run %d is %s, want %s", i, run.Spec.Name, runs[i].Spec.Name)
		}
	}
	if len(r.Scenarios) != 1 || len(r.Rows) != 9 {
		t.Fatalf("%d scenarios, %d rows", len(r.Scenarios), len(r.Rows))
	}
	s := r.Scenarios[0]
	if s.Key != KeyTotal || len(s.Orders) != 3 || s.Bound != (Stat{Mean: 275, Min: 270, Max: 280}) {
		t.Fatalf("scenario %+v", s)
	}
	rr := s.policy("round-robin")
	if rr.Total != (Stat{Mean: 500, Min: 400, Max: 600}) || rr.P90 != (Stat{Mean: 433.3333333333333, Min: 350, Max: 500}) {
		t.Fatalf("round-robin total %+v p90 %+v", rr.Total, rr.P90)
	}
	pl := s.policy("predicted-latency")
	if !near(pl.OverBound.Min, 280.0/270-1) || !near(pl.OverBound.Max, 300.0/280-1) || !near(pl.OverBound.Mean, (10.0/270+20.0/280+15.0/275)/3) {
		t.Fatalf("over bound %+v", pl.OverBound)
	}
	// every row compares with round-robin's run of its order
	if row := r.Rows[5]; row.Policy != "predicted-latency" || row.Order != 1 || row.BaselineTotal != 500 || !near(row.VsBaseline, 0.4) {
		t.Fatalf("row %+v", row)
	}
	if a := target(t, r.Targets, "a", ScenarioIdentical); a.Status != TargetPass {
		t.Fatalf("target a: %+v", a)
	}
	if b := target(t, r.Targets, "b", ScenarioIdentical); b.Status != TargetPass || !strings.Contains(b.Detail, "320.0 s against 500.0 s") {
		t.Fatalf("target b: %+v", b)
	}
	for _, tg := range []Target{target(t, r.Targets, "a", ScenarioSlow), target(t, r.Targets, "c", ScenarioHetero)} {
		if tg.Status != TargetNotRun || !strings.Contains(tg.Detail, "fleet was not run") {
			t.Fatalf("target of a fleet not run: %+v", tg)
		}
	}

	dir := t.TempDir()
	md, err := r.Write(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| (a) | identical | predicted-latency within 10% of the ideal bound on every order and never later than round-robin | **PASS** |",
		"| (c) | hetero |", "| not run | the hetero fleet was not run |",
		"## Fleet identical: 4 pods at speeds 1,1,1,1",
		"Ideal lower bound 275.0 s (270.0 s–280.0 s)",
		"| round-robin | 500.0 s (400.0 s–600.0 s) | — |",
		"| predicted-latency | 290.0 s (280.0 s–300.0 s) | 42.0% sooner |",
		"![identical: total time per order](orders-identical.png)",
		"| identical | 1 | predicted-latency | 300.0 s | 40.0% sooner | +7.1% | 280.0 s |",
		"pod-0 1, pod-1 1 | 1.50 1.20 1.00 → 1.50 1.20 1.00 |",
		"a noisy neighbour burning 2 threads",
		"Machine load average (1 min) over the runs: 1.50 to 1.50",
		"- [identical-load-aware-o2](queue-identical-load-aware-o2.png)",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	for _, name := range []string{"orders-identical.png", "queue-identical-round-robin-o0.png", "report.json", "results-identical-load-aware-o1.json"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.Open(filepath.Join(dir, "orders-identical.png"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := png.Decode(f); err != nil {
		t.Fatal(err)
	}
	back, err := ReadResult(filepath.Join(dir, "results-identical-load-aware-o1.json"))
	if err != nil || back.Spec.Scenario != ScenarioIdentical || back.Spec.Order != 1 || back.LoadEnd == nil || back.LoadEnd[0] != 1.5 || back.Spec.NoisyNeighbour != 2 {
		t.Fatalf("results read back: %+v, %v", back, err)
	}
}

func TestRoutingTargets(t *testing.T) {
	type run struct {
		scenario, policy string
		order            int
		total, p90       float64
	}
	const bound = 100.0
	for _, tc := range []struct {
		name string
		runs []run
		// failed requests of the first run
		failed int
		want   map[string]TargetStatus // "a/identical" -> status
		detail map[string]string       // "a/identical" -> part of the detail
	}{
		{
			name: "recommended near the bound and ahead of round-robin",
			runs: []run{
				{ScenarioIdentical, "round-robin", 0, 200, 150}, {ScenarioIdentical, "predicted-latency", 0, 105, 90},
				{ScenarioIdentical, "round-robin", 1, 180, 150}, {ScenarioIdentical, "predicted-latency", 1, 110, 90},
			},
			want: map[string]TargetStatus{"a/identical": TargetPass, "a/slow": TargetNotRun, "b/identical": TargetNotRun, "c/hetero": TargetNotRun},
			detail: map[string]string{
				"a/identical": "+5.0% to +10.0% over the bound on 2 orders; 38.9% to 47.5% sooner than round-robin on 2",
				"b/identical": "load-aware was not run on it",
			},
		},
		{
			name: "one order over the bound",
			runs: []run{
				{ScenarioSlow, "round-robin", 0, 200, 150}, {ScenarioSlow, "predicted-latency", 0, 105, 90},
				{ScenarioSlow, "round-robin", 1, 180, 150}, {ScenarioSlow, "predicted-latency", 1, 111, 90},
			},
			want:   map[string]TargetStatus{"a/slow": TargetFail, "a/identical": TargetNotRun},
			detail: map[string]string{"a/slow": "more than 10% over the bound on order 1 (+11.0%)"},
		},
		{
			name: "later than round-robin on one order, though sooner on average",
			runs: []run{
				{ScenarioIdentical, "round-robin", 0, 100, 150}, {ScenarioIdentical, "predicted-latency", 0, 101, 90},
				{ScenarioIdentical, "round-robin", 1, 180, 150}, {ScenarioIdentical, "predicted-latency", 1, 105, 90},
			},
			want:   map[string]TargetStatus{"a/identical": TargetFail},
			detail: map[string]string{"a/identical": "later than round-robin on order 0 (101.0 s against 100.0 s)"},
		},
		{
			name: "failed requests fail the target",
			runs: []run{
				{ScenarioIdentical, "predicted-latency", 0, 101, 90}, {ScenarioIdentical, "round-robin", 0, 200, 150},
			},
			failed: 3,
			want:   map[string]TargetStatus{"a/identical": TargetFail},
			detail: map[string]string{"a/identical": "requests failed on order 0 (3)"},
		},
		{
			name: "load-aware worse than round-robin on average",
			runs: []run{
				{ScenarioIdentical, "round-robin", 0, 200, 150}, {ScenarioIdentical, "load-aware", 0, 150, 90},
				{ScenarioIdentical, "round-robin", 1, 200, 150}, {ScenarioIdentical, "load-aware", 1, 270, 90},
				{ScenarioHetero, "round-robin", 0, 200, 30}, {ScenarioHetero, "load-aware", 0, 200, 20},
			},
			want: map[string]TargetStatus{"b/identical": TargetFail, "b/hetero": TargetPass, "a/identical": TargetNotRun, "c/hetero": TargetNotRun},
			detail: map[string]string{
				"b/identical": "load-aware is worse than round-robin on average: total time 210.0 s against 200.0 s (5.0% later)",
				"b/hetero":    "p90 latency 20.0 s against 30.0 s on average (1.50x lower)",
				"a/identical": "predicted-latency was not run on it",
			},
		},
		{
			name: "hetero p90 at least twice lower",
			runs: []run{
				{ScenarioHetero, "load-aware", 0, 200, 30}, {ScenarioHetero, "predicted-latency", 0, 200, 12},
				{ScenarioHetero, "load-aware", 1, 200, 20}, {ScenarioHetero, "predicted-latency", 1, 200, 13},
			},
			want:   map[string]TargetStatus{"c/hetero": TargetPass},
			detail: map[string]string{"c/hetero": "p90 12.50 s (12.00–13.00) against load-aware's 25.00 s (20.00–30.00): 2.00x lower"},
		},
		{
			name: "hetero p90 not twice lower",
			runs: []run{
				{ScenarioHetero, "load-aware", 0, 200, 30}, {ScenarioHetero, "predicted-latency", 0, 200, 16},
			},
			want:   map[string]TargetStatus{"c/hetero": TargetFail},
			detail: map[string]string{"c/hetero": "1.88x lower"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var runs []*RunResult
			for _, r := range tc.runs {
				runs = append(runs, matrixRun(r.scenario, r.policy, r.order, r.total, r.p90, bound))
			}
			if tc.failed > 0 {
				res := runs[0].Results
				for range tc.failed {
					res.Requests = append(res.Requests, runner.Result{ID: "x", Error: "timeout"})
				}
				res.Summary = runner.Summarize(res.Requests, res.Summary.TotalE2E)
			}
			r, err := NewRoutingReport("t", "predicted-latency", runs)
			if err != nil {
				t.Fatal(err)
			}
			for k, want := range tc.want {
				id, scenario, _ := strings.Cut(k, "/")
				if got := target(t, r.Targets, id, scenario); got.Status != want {
					t.Errorf("target %s: %s (%s), want %s", k, got.Status, got.Detail, want)
				}
			}
			for k, want := range tc.detail {
				id, scenario, _ := strings.Cut(k, "/")
				if got := target(t, r.Targets, id, scenario); !strings.Contains(got.Detail, want) {
					t.Errorf("target %s: detail %q lacks %q", k, got.Detail, want)
				}
			}
		})
	}
}

func TestRoutingReportNeedsScenarios(t *testing.T) {
	if _, err := NewRoutingReport("t", "x", nil); err == nil {
		t.Fatal("a report of no runs")
	}
	run := matrixRun(ScenarioIdentical, "round-robin", 0, 1, 1, 1)
	run.Spec.Scenario = ""
	if _, err := NewRoutingReport("t", "x", []*RunResult{run}); err == nil || !strings.Contains(err.Error(), "no fleet scenario") {
		t.Fatalf("error %v", err)
	}
}

func TestStatOf(t *testing.T) {
	if s := statOf([]float64{3, 1, 2}); s != (Stat{Mean: 2, Min: 1, Max: 3}) {
		t.Fatalf("stat %+v", s)
	}
	if s := statOf(nil); s != (Stat{}) {
		t.Fatalf("stat of nothing %+v", s)
	}
}
