package bench

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// The peers benchmark: Hermod's picker and the llm-d router's EPP, each
// behind the same ext_proc front, on the same fleet and workload, with
// the same config (the llm-d router's own test/perf configs), and Hermod
// again with its recommended config.

// PeerConfigs are the llm-d router's test/perf router configs the peers
// benchmark runs on both routers, by the benchmark's name for them and
// the file of the router's checkout (test/perf/config/router-configs/).
var PeerConfigs = []struct{ Name, File string }{
	{"llm-d-random", "random-only-default-parsers.yaml"},
	{"llm-d-optimized-baseline", "optimized-baseline.yaml"},
}

// PeersOptions shape the peers benchmark.
type PeersOptions struct {
	// Routing gives the fleets, workloads and orders (its Policies are
	// ignored: see Shared and HermodOnly).
	Routing RoutingOptions
	// Shared are the configs both routers run, HermodOnly those only
	// Hermod does (its recommended config, which uses Hermod's plugins).
	Shared, HermodOnly []string
	// Peer is the llm-d router: its EPP binary and source (a commit).
	Peer Router
	// Src, when set, is a checkout of the llm-d router whose test/perf
	// configs replace the copies bundled here.
	Src string
}

// DefaultPeers returns the benchmark's defaults: the routing benchmark's
// fleets and workloads over three orders, the llm-d router's random and
// optimized-baseline configs on both routers, and Hermod's
// predicted-latency, every request streamed.
func DefaultPeers() PeersOptions {
	r := DefaultRouting()
	r.Orders = 3
	r.Stream = true // every scenario's TTFT is measured
	shared := make([]string, len(PeerConfigs))
	for i, c := range PeerConfigs {
		shared[i] = c.Name
	}
	return PeersOptions{Routing: r, Shared: shared, HermodOnly: []string{"predicted-latency"}}
}

// PeersSpecs returns the benchmark's runs: for every fleet scenario and
// order, each shared config on Hermod then on the peer, then the
// Hermod-only configs, so that the runs compared are close in time.
func PeersSpecs(o PeersOptions) ([]Spec, error) {
	if o.Peer.EPP == "" {
		return nil, errors.New("peers: the llm-d router's EPP binary is required")
	}
	o.Routing.Policies = slices.Concat(o.Shared, o.HermodOnly)
	base, err := RoutingSpecs(o.Routing)
	if err != nil {
		return nil, err
	}
	configs := map[string]string{}
	if o.Src != "" {
		for _, name := range o.Shared {
			i := slices.IndexFunc(PeerConfigs, func(c struct{ Name, File string }) bool { return c.Name == name })
			if i < 0 {
				continue // not one of the router's: the bundled config
			}
			cfg, err := ReadPerfConfig(filepath.Join(o.Src, "test", "perf", "config", "router-configs", PeerConfigs[i].File))
			if err != nil {
				return nil, err
			}
			configs[name] = cfg
		}
	}
	peer := o.Peer
	peer.Kind = RouterLLMD
	var specs []Spec
	for _, s := range base {
		if cfg, ok := configs[s.Stack.Policy]; ok {
			s.Stack.Config = cfg
		}
		h := s
		h.Name, h.Router = s.Name+"-hermod", Router{Kind: RouterHermod}
		specs = append(specs, h)
		if slices.Contains(o.Shared, s.Stack.Policy) {
			p := s
			p.Name, p.Router = s.Name+"-llm-d", peer
			specs = append(specs, p)
		}
	}
	return specs, nil
}

// ReadPerfConfig reads one of the llm-d router's test/perf router configs
// (Helm values of its router chart) and returns the EndpointPickerConfig
// in it, unchanged: router.epp.pluginsCustomConfig[router.epp.
// pluginsConfigFile].
func ReadPerfConfig(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("perf config: %w", err)
	}
	var values struct {
		Router struct {
			EPP struct {
				PluginsConfigFile   string            `yaml:"pluginsConfigFile"`
				PluginsCustomConfig map[string]string `yaml:"pluginsCustomConfig"`
			} `yaml:"epp"`
		} `yaml:"router"`
	}
	if err := yaml.Unmarshal(b, &values); err != nil {
		return "", fmt.Errorf("perf config %s: %w", path, err)
	}
	epp := values.Router.EPP
	cfg, ok := epp.PluginsCustomConfig[epp.PluginsConfigFile]
	if !ok || strings.TrimSpace(cfg) == "" {
		return "", fmt.Errorf("perf config %s: no router.epp.pluginsCustomConfig[%q]", path, epp.PluginsConfigFile)
	}
	return cfg, nil
}

// Span is a figure's least and greatest value over repeated runs.
type Span struct {
	Min float64 `json:"min"`
	Max float64 `json:"max"`
}

func (s *Span) add(v float64, first bool) {
	if first {
		s.Min, s.Max = v, v
		return
	}
	s.Min, s.Max = math.Min(s.Min, v), math.Max(s.Max, v)
}

// PeerRow is one router and config on one fleet scenario, over its runs
// (arrival orders): each figure's range.
type PeerRow struct {
	Scenario string `json:"scenario"`
	Policy   string `json:"policy"`
	Router   string `json:"router"`
	Runs     int    `json:"runs"`
	Failed   int    `json:"failed"`
	// seconds
	TTFTP50 Span `json:"ttft_p50"`
	TTFTP90 Span `json:"ttft_p90"`
	TTFTP99 Span `json:"ttft_p99"`
	E2EP50  Span `json:"e2e_p50"`
	E2EP90  Span `json:"e2e_p90"`
	// OutputTokens is completion tokens per second; HitRate the share of
	// prompt tokens served from prefix caches.
	OutputTokens Span `json:"output_tokens_per_s"`
	HitRate      Span `json:"prefix_hit_rate"`
	// the picker's decision time (seconds), CPU per request (seconds)
	// and peak RSS (bytes)
	DecisionP50    Span `json:"decision_p50"`
	DecisionP99    Span `json:"decision_p99"`
	CPUPerRequest  Span `json:"cpu_per_request"`
	BusyPerRequest Span `json:"busy_cpu_per_request"`
	IdleCores      Span `json:"idle_cores"`
	PeakRSS        Span `json:"peak_rss"`
}

// PeersReport is the benchmark's report.
type PeersReport struct {
	Title string       `json:"title"`
	Peer  Router       `json:"peer"`
	Rows  []PeerRow    `json:"rows"`
	Runs  []*RunResult `json:"runs"`
	// Load is the machine's 1-minute load average over the runs.
	Load Span `json:"load"`
}

// NewPeersReport aggregates the runs by scenario, config and router.
func NewPeersReport(title string, runs []*RunResult) (*PeersReport, error) {
	if len(runs) == 0 {
		return nil, errors.New("peers report: no runs")
	}
	rep := &PeersReport{Title: title, Runs: runs}
	index := map[[3]string]int{}
	loads := 0
	for _, r := range runs {
		if r.Spec.Router.Kind == RouterLLMD {
			rep.Peer = r.Spec.Router
		}
		if r.Router == nil {
			return nil, fmt.Errorf("peers report: run %s has no router figures (not run through the front)", r.Spec.Name)
		}
		for _, l := range []*LoadAvg{r.LoadStart, r.LoadEnd} {
			if l != nil {
				rep.Load.add(l[0], loads == 0)
				loads++
			}
		}
		key := [3]string{r.Spec.Scenario, r.Spec.Stack.Policy, r.Spec.Router.Kind}
		i, ok := index[key]
		if !ok {
			i = len(rep.Rows)
			index[key] = i
			rep.Rows = append(rep.Rows, PeerRow{Scenario: key[0], Policy: key[1], Router: key[2]})
		}
		row := &rep.Rows[i]
		first := row.Runs == 0
		s, rt := r.Results.Summary, r.Router
		row.Runs++
		row.Failed += s.Failed
		row.TTFTP50.add(s.TTFTP50, first)
		row.TTFTP90.add(s.TTFTP90, first)
		row.TTFTP99.add(s.TTFTP99, first)
		row.E2EP50.add(s.P50, first)
		row.E2EP90.add(s.P90, first)
		row.OutputTokens.add(s.OutputTokens, first)
		row.HitRate.add(s.HitRate, first)
		row.DecisionP50.add(rt.DecisionP50, first)
		row.DecisionP99.add(rt.DecisionP99, first)
		row.CPUPerRequest.add(rt.CPUPerRequest, first)
		row.BusyPerRequest.add(rt.BusyPerRequest, first)
		row.IdleCores.add(rt.IdleCores, first)
		row.PeakRSS.add(float64(rt.PeakRSS), first)
	}
	return rep, nil
}

// Write saves report.md and report.json in dir and returns the markdown.
func (r *PeersReport) Write(dir string) (string, error) {
	md := r.Markdown()
	if err := os.WriteFile(filepath.Join(dir, "report.md"), []byte(md), 0o644); err != nil {
		return "", fmt.Errorf("peers report: %w", err)
	}
	return md, writeJSON(filepath.Join(dir, "report.json"), r)
}

// Markdown is the report's tables: one per fleet scenario, a row per
// config and router, every figure as its range over the runs; then, for
// each config both ran, Hermod's figures as ratios to the peer's.
func (r *PeersReport) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n\n", r.Title)
	if r.Peer.EPP != "" {
		src := r.Peer.Source
		if src == "" {
			src = "unknown source"
		}
		fmt.Fprintf(&b, "The llm-d router: `%s` (%s). Both pickers behind the same ext_proc front (tools/loadgen/extprocfront), on the same fleet and workload. ", filepath.Base(r.Peer.EPP), src)
	}
	fmt.Fprintf(&b, "Machine load (1-minute average) during the runs: %s. Figures are the range over the runs (arrival orders).\n\n", spanText(r.Load, 1, "%.1f"))
	scenarios := []string{}
	for _, row := range r.Rows {
		if !slices.Contains(scenarios, row.Scenario) {
			scenarios = append(scenarios, row.Scenario)
		}
	}
	for _, sc := range scenarios {
		fmt.Fprintf(&b, "## %s\n\n", sc)
		b.WriteString("| config | router | runs | TTFT p50 (s) | TTFT p90 (s) | TTFT p99 (s) | E2E p50 (s) | E2E p90 (s) | output tok/s | prefix hits | decision p50 (ms) | decision p99 (ms) | CPU/request (µs) | above idle (µs) | idle (cores) | peak RSS (MiB) |\n")
		b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, row := range r.Rows {
			if row.Scenario != sc {
				continue
			}
			runs := fmt.Sprint(row.Runs)
			if row.Failed > 0 {
				runs += fmt.Sprintf(" (%d failed requests)", row.Failed)
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", row.Policy, row.Router, runs,
				ttftText(row.TTFTP50), ttftText(row.TTFTP90), ttftText(row.TTFTP99),
				spanText(row.E2EP50, 1, "%.2f"), spanText(row.E2EP90, 1, "%.2f"), spanText(row.OutputTokens, 1, "%.0f"),
				spanText(row.HitRate, 100, "%.1f%%"), spanText(row.DecisionP50, 1e3, "%.2f"), spanText(row.DecisionP99, 1e3, "%.2f"),
				spanText(row.CPUPerRequest, 1e6, "%.0f"), spanText(row.BusyPerRequest, 1e6, "%.0f"), spanText(row.IdleCores, 1, "%.3f"), spanText(row.PeakRSS, 1.0/(1<<20), "%.0f"))
		}
		b.WriteString("\n")
		for _, row := range r.Rows {
			if row.Scenario != sc || row.Router != RouterHermod {
				continue
			}
			peer := r.row(sc, row.Policy, RouterLLMD)
			if peer == nil {
				continue
			}
			fmt.Fprintf(&b, "- %s: Hermod's TTFT p90 is %s of the peer's; the peer's picker spends %s Hermod's CPU per request (%s above idle) and decides in %s Hermod's time at p99.\n",
				row.Policy, ratioText(mid(row.TTFTP90), mid(peer.TTFTP90)), ratioText(mid(peer.CPUPerRequest), mid(row.CPUPerRequest)),
				ratioText(mid(peer.BusyPerRequest), mid(row.BusyPerRequest)), ratioText(mid(peer.DecisionP99), mid(row.DecisionP99)))
		}
		b.WriteString("\n")
	}
	return b.String()
}

func (r *PeersReport) row(scenario, policy, router string) *PeerRow {
	for i := range r.Rows {
		if row := &r.Rows[i]; row.Scenario == scenario && row.Policy == policy && row.Router == router {
			return row
		}
	}
	return nil
}

// spanText formats a range scaled by scale, one value when it is one.
func spanText(s Span, scale float64, format string) string {
	lo, hi := fmt.Sprintf(format, s.Min*scale), fmt.Sprintf(format, s.Max*scale)
	if lo == hi {
		return lo
	}
	return lo + "–" + hi
}

// ttftText is spanText for a TTFT, which unstreamed requests do not
// measure (zero).
func ttftText(s Span) string {
	if s.Min == 0 && s.Max == 0 {
		return "—"
	}
	return spanText(s, 1, "%.3f")
}

// mid is the middle of a range.
func mid(s Span) float64 { return (s.Min + s.Max) / 2 }

// ratioText is a/b as "0.85x", or "n/a" without a b.
func ratioText(a, b float64) string {
	if b <= 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2fx", a/b)
}
