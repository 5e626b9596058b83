package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermod/hermod/tools/loadgen/runner"
)

// The peer's test/perf config is read out of its Helm values unchanged.
func TestReadPerfConfig(t *testing.T) {
	dir := t.TempDir()
	values := `router:
  epp:
    pluginsConfigFile: "plugins.yaml"
    pluginsCustomConfig:
      plugins.yaml: |
        apiVersion: llm-d.ai/v1alpha1
        kind: EndpointPickerConfig
        plugins:
        - type: random-picker
  inferencePool:
    failureMode: FailOpen
`
	path := filepath.Join(dir, "random.yaml")
	if err := os.WriteFile(path, []byte(values), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := ReadPerfConfig(path)
	want := "apiVersion: llm-d.ai/v1alpha1\nkind: EndpointPickerConfig\nplugins:\n- type: random-picker\n"
	if err != nil || got != want {
		t.Fatalf("got %q %v, want %q", got, err, want)
	}
	if err := os.WriteFile(path, []byte("router:\n  epp:\n    pluginsConfigFile: missing.yaml\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadPerfConfig(path); err == nil || !strings.Contains(err.Error(), "missing.yaml") {
		t.Fatalf("values without the named config: %v", err)
	}
}

// Every shared config runs on Hermod and then on the peer, a Hermod-only
// one on Hermod alone; a checkout's configs replace the bundled ones.
func TestPeersSpecs(t *testing.T) {
	o := DefaultPeers()
	o.Routing.Fleets, o.Routing.Orders, o.Routing.Warmup = []string{ScenarioIdentical}, 1, 0
	if _, err := PeersSpecs(o); err == nil {
		t.Fatal("specs without a peer")
	}
	o.Peer = Router{EPP: "/opt/epp", Source: "llm-d/llm-d-router@abc"}
	src := t.TempDir()
	dir := filepath.Join(src, "test", "perf", "config", "router-configs")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range PeerConfigs {
		v := "router:\n  epp:\n    pluginsConfigFile: p.yaml\n    pluginsCustomConfig:\n      p.yaml: |\n        # from the checkout: " + c.Name + "\n        plugins: []\n"
		if err := os.WriteFile(filepath.Join(dir, c.File), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	o.Src = src
	specs, err := PeersSpecs(o)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range specs {
		got = append(got, s.Name)
		if s.Router.Kind == RouterLLMD && (s.Router.EPP != "/opt/epp" || s.Router.Source != "llm-d/llm-d-router@abc") {
			t.Errorf("%s: router %+v", s.Name, s.Router)
		}
		if strings.HasPrefix(s.Stack.Policy, "llm-d-") && !strings.Contains(s.Stack.Config, "from the checkout: "+s.Stack.Policy) {
			t.Errorf("%s: not the checkout's config: %q", s.Name, s.Stack.Config)
		}
	}
	want := "identical-llm-d-random-o0-hermod identical-llm-d-random-o0-llm-d identical-llm-d-optimized-baseline-o0-hermod identical-llm-d-optimized-baseline-o0-llm-d identical-predicted-latency-o0-hermod"
	if strings.Join(got, " ") != want {
		t.Fatalf("runs %s\nwant %s", strings.Join(got, " "), want)
	}
}

// The report gives each figure's range over a row's runs and compares
// Hermod with the peer on the configs both ran.
func TestPeersReport(t *testing.T) {
	run := func(router string, order int, ttftP90, cpu float64) *RunResult {
		return &RunResult{
			Spec:    Spec{Name: router, Scenario: ScenarioIdentical, Order: order, Stack: Stack{Policy: "llm-d-random"}, Router: Router{Kind: router, EPP: "/opt/epp"}},
			Results: &runner.Results{Summary: runner.Summary{TTFTP90: ttftP90, Count: 10}},
			Router:  &RouterStats{CPUPerRequest: cpu, DecisionP50: 0.001, DecisionP99: 0.002, PeakRSS: 40 << 20},
		}
	}
	rep, err := NewPeersReport("t", []*RunResult{run(RouterHermod, 0, 0.10, 50e-6), run(RouterLLMD, 0, 0.12, 1000e-6), run(RouterHermod, 1, 0.20, 70e-6), run(RouterLLMD, 1, 0.14, 1400e-6)})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != 2 || rep.Rows[0].Runs != 2 || rep.Rows[0].TTFTP90 != (Span{0.10, 0.20}) || rep.Rows[1].CPUPerRequest != (Span{1000e-6, 1400e-6}) || rep.Peer.EPP != "/opt/epp" {
		t.Fatalf("rows %+v", rep.Rows)
	}
	md := rep.Markdown()
	for _, want := range []string{"| llm-d-random | hermod | 2 | — | 0.100–0.200 |", "Hermod's TTFT p90 is 1.15x of the peer's", "spends 20.00x Hermod's CPU per request"} {
		if !strings.Contains(md, want) {
			t.Errorf("the report lacks %q:\n%s", want, md)
		}
	}
	if _, err := NewPeersReport("t", []*RunResult{{Spec: Spec{Name: "gw"}, Results: &runner.Results{}}}); err == nil {
		t.Fatal("a run through the gateway reported as a peer run")
	}
}
