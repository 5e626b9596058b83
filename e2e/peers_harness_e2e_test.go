package e2e

import (
	"context"
	"testing"

	"github.com/hermod/hermod/tools/loadgen/bench"
	"github.com/hermod/hermod/tools/loadgen/workload"
)

// The peers benchmark's harness, run with nothing built from outside:
// one of the llm-d router's own configs on Hermod's picker, driven
// through the ext_proc front as the peer is. Every request is routed and
// served, the picker's CPU, memory and decision times are measured, and
// the report names the run (so the harness cannot rot between peer runs).
func TestPeersHarnessOnHermod(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole stack; skipped with -short")
	}
	o := bench.DefaultPeers()
	o.Peer = bench.Router{EPP: "/nonexistent/epp"} // the peer's runs are dropped below
	o.Routing.Fleets, o.Routing.Orders, o.Routing.Warmup = []string{bench.ScenarioIdentical}, 1, 8
	o.Routing.Workload = smallReference()
	o.Shared, o.HermodOnly = []string{"llm-d-optimized-baseline"}, nil
	specs, err := bench.PeersSpecs(o)
	if err != nil {
		t.Fatal(err)
	}
	if len(specs) != 2 || specs[0].Router.Kind != bench.RouterHermod || specs[1].Router.Kind != bench.RouterLLMD || specs[0].Stack.Config != specs[1].Stack.Config {
		t.Fatalf("specs: %+v", specs)
	}
	spec := specs[0]
	r, err := bench.Run(context.Background(), bench.Env{BinDir: binDir, Dir: t.TempDir()}, spec)
	if err != nil {
		t.Fatal(err)
	}
	w, _ := workload.Reference(smallReference())
	s, rt := r.Results.Summary, r.Router
	if s.Failed != 0 || s.Count != len(w.Requests) || len(s.PerPod) != spec.Fleet.Pods {
		t.Fatalf("%d ok, %d failed, served by %v", s.Count, s.Failed, s.PerPod)
	}
	if rt == nil || rt.Process != "hermod-picker" || rt.CPUSeconds <= 0 || rt.PeakRSS <= 0 || rt.DecisionP50 <= 0 || rt.DecisionP99 < rt.DecisionP50 || rt.Immediate != 0 || rt.UpstreamErrors != 0 {
		t.Fatalf("router figures %+v", rt)
	}
	t.Logf("hermod-picker through the front: decisions p50 %.2f ms p99 %.2f ms, %.0f µs CPU per request, peak RSS %d MiB",
		1e3*rt.DecisionP50, 1e3*rt.DecisionP99, 1e6*rt.CPUPerRequest, rt.PeakRSS>>20)
	rep, err := bench.NewPeersReport("harness", []*bench.RunResult{r})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != 1 || rep.Rows[0].Router != bench.RouterHermod || rep.Rows[0].Policy != "llm-d-optimized-baseline" {
		t.Fatalf("report rows %+v", rep.Rows)
	}
}
