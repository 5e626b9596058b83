package bench

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"

	"github.com/hermod/hermod/tools/loadgen/chart"
)

// RoutingReport compares routing policies over fleet scenarios and
// arrival orders (the routing benchmark): per scenario, every policy's
// figures as mean, least and greatest over the orders; the targets the
// recommended policy is held to; and every run.
type RoutingReport struct {
	Title string `json:"title"`
	// Recommended is the policy the targets are about.
	Recommended string `json:"recommended"`
	// Baseline is the policy the others are compared to (round-robin).
	Baseline  string          `json:"baseline"`
	Scenarios []ScenarioStats `json:"scenarios"`
	Targets   []Target        `json:"targets"`
	// Rows are every run's line, in run order.
	Rows []MatrixRow  `json:"rows"`
	Runs []*RunResult `json:"runs"`
	// Charts are the PNG files written: "orders-<scenario>" and, by run
	// name, the queue charts.
	Charts map[string]string `json:"charts"`
}

// Key figures of a scenario: what tells its policies apart.
const (
	// KeyTotal is the time to finish the whole workload.
	KeyTotal = "total"
	// KeyP90 is the 90th percentile of request latency.
	KeyP90 = "p90"
)

// ScenarioStats are one fleet scenario's policies over its orders.
type ScenarioStats struct {
	Scenario string `json:"scenario"`
	// Fleet is the scenario's fleet (that of its first run).
	Fleet    Fleet  `json:"fleet"`
	Workload string `json:"workload"`
	Requests int    `json:"requests"`
	// Key is the scenario's key figure (KeyTotal or KeyP90).
	Key string `json:"key"`
	// Orders are the arrival orders run.
	Orders []int `json:"orders"`
	// Bound is the ideal lower bound over the orders (shuffles move the
	// last request, and with it the bound).
	Bound Stat `json:"bound_s"`
	// Load is the offered load over the orders: the workload's work over
	// the fleet's capacity times its last launch time.
	Load     Stat          `json:"offered_load"`
	Policies []PolicyStats `json:"policies"`

	bounds, loads []float64 // per order, until summarize
}

// policy returns the named policy's stats, or nil.
func (s *ScenarioStats) policy(name string) *PolicyStats {
	for i := range s.Policies {
		if s.Policies[i].Policy == name {
			return &s.Policies[i]
		}
	}
	return nil
}

// PolicyStats are one policy's figures over a scenario's orders.
type PolicyStats struct {
	Policy string `json:"policy"`
	// Runs are the policy's runs, by order.
	Runs      []OrderFigures `json:"runs"`
	Total     Stat           `json:"total_s"`
	OverBound Stat           `json:"over_bound"`
	P90       Stat           `json:"p90_s"`
	P99       Stat           `json:"p99_s"`
	// Failed is the failed requests over all orders.
	Failed int `json:"failed"`
}

// key returns the stat of the key figure.
func (p *PolicyStats) key(key string) Stat {
	if key == KeyP90 {
		return p.P90
	}
	return p.Total
}

// order returns the policy's run of order k.
func (p *PolicyStats) order(k int) (OrderFigures, bool) {
	i := slices.IndexFunc(p.Runs, func(o OrderFigures) bool { return o.Order == k })
	if i < 0 {
		return OrderFigures{}, false
	}
	return p.Runs[i], true
}

// OrderFigures are one run's figures.
type OrderFigures struct {
	Order     int     `json:"order"`
	Run       string  `json:"run"`
	Total     float64 `json:"total_s"`
	Bound     float64 `json:"bound_s"`
	OverBound float64 `json:"over_bound"`
	P90       float64 `json:"p90_s"`
	P99       float64 `json:"p99_s"`
	Failed    int     `json:"failed"`
}

func (o OrderFigures) key(key string) float64 {
	if key == KeyP90 {
		return o.P90
	}
	return o.Total
}

// Stat is a figure's mean, least and greatest value over runs.
type Stat struct {
	Mean float64 `json:"mean"`
	Min  float64 `json:"min"`
	Max  float64 `json:"max"`
}

// statOf summarizes xs (the zero Stat when empty).
func statOf(xs []float64) Stat {
	if len(xs) == 0 {
		return Stat{}
	}
	s := Stat{Min: math.Inf(1), Max: math.Inf(-1)}
	for _, x := range xs {
		s.Mean += x
		s.Min, s.Max = min(s.Min, x), max(s.Max, x)
	}
	s.Mean /= float64(len(xs))
	return s
}

// MatrixRow is one run's line of the appendix.
type MatrixRow struct {
	Row
	Scenario string `json:"scenario"`
	Order    int    `json:"order"`
	// BaselineTotal is the total of the baseline policy's run of the
	// same scenario and order (0: none), which Row.VsBaseline compares
	// with.
	BaselineTotal float64  `json:"baseline_total_s,omitempty"`
	LoadStart     *LoadAvg `json:"load_start,omitempty"`
	LoadEnd       *LoadAvg `json:"load_end,omitempty"`
}

// TargetStatus is a target's verdict.
type TargetStatus string

// Target verdicts.
const (
	TargetPass   TargetStatus = "PASS"
	TargetFail   TargetStatus = "FAIL"
	TargetNotRun TargetStatus = "not run"
)

// Target is a claim the benchmark checks.
type Target struct {
	// ID is the target's letter: (a) the recommended policy near the bound
	// and never behind round-robin, (b) load-aware no worse than
	// round-robin, (c) the recommended policy's p90 on the hetero fleet.
	ID       string       `json:"id"`
	Scenario string       `json:"scenario"`
	Claim    string       `json:"claim"`
	Status   TargetStatus `json:"status"`
	Detail   string       `json:"detail"`
}

// The targets' thresholds.
const (
	// TargetOverBound is how far over the ideal bound the recommended
	// policy may finish on any order of the identical and slow fleets.
	TargetOverBound = 0.10
	// TargetHeteroP90 is how many times lower than load-aware's the
	// recommended policy's p90 on the hetero fleet must be.
	TargetHeteroP90 = 2.0
	// loadAware is the policy target (b) and (c) compare with.
	loadAware = "load-aware"
)

// NewRoutingReport aggregates the routing benchmark's runs (every one
// with its Spec.Scenario) and checks the targets of the recommended
// policy. Runs are ordered as RoutingSpecs orders them: by scenario (in
// Scenarios order), order, then policy (RoutingPolicies first, then by
// name), whatever order they come in.
func NewRoutingReport(title, recommended string, runs []*RunResult) (*RoutingReport, error) {
	if len(runs) == 0 {
		return nil, errors.New("report: no runs")
	}
	runs = slices.Clone(runs)
	slices.SortStableFunc(runs, func(a, b *RunResult) int {
		return cmp.Or(
			cmp.Compare(rank(Scenarios, a.Spec.Scenario), rank(Scenarios, b.Spec.Scenario)),
			cmp.Compare(a.Spec.Scenario, b.Spec.Scenario),
			cmp.Compare(a.Spec.Order, b.Spec.Order),
			cmp.Compare(rank(RoutingPolicies, a.Spec.Stack.Policy), rank(RoutingPolicies, b.Spec.Stack.Policy)),
			cmp.Compare(a.Spec.Stack.Policy, b.Spec.Stack.Policy),
		)
	})
	r := &RoutingReport{Title: title, Recommended: recommended, Baseline: RoutingBaseline, Runs: runs, Charts: map[string]string{}}
	base := map[string]float64{} // the baseline's total by scenario and order
	for _, run := range runs {
		if run.Spec.Scenario == "" {
			return nil, fmt.Errorf("report: run %s has no fleet scenario (not a routing benchmark run)", run.Spec.Name)
		}
		if run.Results == nil || run.Spec.Workload == nil {
			return nil, fmt.Errorf("report: run %s has no results", run.Spec.Name)
		}
		if run.Spec.Stack.Policy == r.Baseline {
			base[orderKey(run)] = run.Results.Summary.TotalE2E
		}
	}
	for _, run := range runs {
		r.Rows = append(r.Rows, MatrixRow{
			Row: newRow(run, base[orderKey(run)]), Scenario: run.Spec.Scenario, Order: run.Spec.Order, BaselineTotal: base[orderKey(run)],
			LoadStart: run.LoadStart, LoadEnd: run.LoadEnd,
		})
		r.add(run)
	}
	for i := range r.Scenarios {
		r.Scenarios[i].summarize()
	}
	r.Targets = routingTargets(r.Scenarios, recommended, r.Baseline)
	return r, nil
}

// rank is name's place in names, or len(names) when it is not there.
func rank(names []string, name string) int {
	if i := slices.Index(names, name); i >= 0 {
		return i
	}
	return len(names)
}

func orderKey(run *RunResult) string {
	return fmt.Sprintf("%s/%d", run.Spec.Scenario, run.Spec.Order)
}

// add files a run under its scenario and policy.
func (r *RoutingReport) add(run *RunResult) {
	i := slices.IndexFunc(r.Scenarios, func(s ScenarioStats) bool { return s.Scenario == run.Spec.Scenario })
	if i < 0 {
		key := KeyTotal
		if run.Spec.Scenario == ScenarioHetero {
			key = KeyP90
		}
		r.Scenarios = append(r.Scenarios, ScenarioStats{
			Scenario: run.Spec.Scenario, Fleet: run.Spec.Fleet, Workload: run.Spec.Workload.Name, Requests: len(run.Spec.Workload.Requests), Key: key,
		})
		i = len(r.Scenarios) - 1
	}
	s := &r.Scenarios[i]
	p := s.policy(run.Spec.Stack.Policy)
	if p == nil {
		s.Policies = append(s.Policies, PolicyStats{Policy: run.Spec.Stack.Policy})
		p = &s.Policies[len(s.Policies)-1]
	}
	sum := run.Results.Summary
	o := OrderFigures{Order: run.Spec.Order, Run: run.Spec.Name, Total: sum.TotalE2E, Bound: run.Bound.Total, P90: sum.P90, P99: sum.P99, Failed: sum.Failed}
	if o.Bound > 0 {
		o.OverBound = (o.Total - o.Bound) / o.Bound
	}
	p.Runs = append(p.Runs, o)
	if !slices.Contains(s.Orders, run.Spec.Order) {
		s.Orders = append(s.Orders, run.Spec.Order)
		if b := run.Bound; b.Capacity > 0 {
			if last := run.Spec.Workload.Duration().Seconds(); last > 0 {
				s.loads = append(s.loads, b.Work/(b.Capacity*last))
			}
		}
		s.bounds = append(s.bounds, run.Bound.Total)
	}
}

// summarize computes the stats from the runs.
func (s *ScenarioStats) summarize() {
	slices.Sort(s.Orders)
	s.Bound, s.Load = statOf(s.bounds), statOf(s.loads)
	for i := range s.Policies {
		p := &s.Policies[i]
		slices.SortFunc(p.Runs, func(a, b OrderFigures) int { return a.Order - b.Order })
		var total, over, p90, p99 []float64
		for _, o := range p.Runs {
			total, over, p90, p99 = append(total, o.Total), append(over, o.OverBound), append(p90, o.P90), append(p99, o.P99)
			p.Failed += o.Failed
		}
		p.Total, p.OverBound, p.P90, p.P99 = statOf(total), statOf(over), statOf(p90), statOf(p99)
	}
}

// routingTargets checks the targets: (a) on the identical and slow
// fleets, the recommended policy within TargetOverBound of the ideal
// bound on every order and never later than the baseline on the same
// order; (b) on every fleet run, load-aware no worse than the baseline on
// average (of the fleet's key figure); (c) on the hetero fleet, the
// recommended policy's mean p90 TargetHeteroP90 times lower than
// load-aware's. A target whose fleet or policies did not run is "not
// run"; one whose policy failed requests fails.
func routingTargets(scs []ScenarioStats, recommended, baseline string) []Target {
	// policies returns the scenario's stats of the policies, or why
	// there are none
	policies := func(name string, names ...string) ([]*PolicyStats, string) {
		i := slices.IndexFunc(scs, func(s ScenarioStats) bool { return s.Scenario == name })
		if i < 0 {
			return nil, "the " + name + " fleet was not run"
		}
		var ps []*PolicyStats
		for _, p := range names {
			st := scs[i].policy(p)
			if st == nil {
				return nil, p + " was not run on it"
			}
			ps = append(ps, st)
		}
		return ps, ""
	}
	var out []Target
	for _, name := range []string{ScenarioIdentical, ScenarioSlow} {
		t := Target{ID: "a", Scenario: name, Claim: fmt.Sprintf("%s within %.0f%% of the ideal bound on every order and never later than %s", recommended, 100*TargetOverBound, baseline)}
		if ps, why := policies(name, recommended, baseline); why != "" {
			t.Status, t.Detail = TargetNotRun, why
		} else {
			t.Status, t.Detail = nearBound(ps[0], ps[1])
		}
		out = append(out, t)
	}
	for _, s := range scs {
		t := Target{ID: "b", Scenario: s.Scenario, Claim: fmt.Sprintf("%s no worse than %s on average (%s)", loadAware, baseline, keyName(s.Key))}
		if ps, why := policies(s.Scenario, loadAware, baseline); why != "" {
			t.Status, t.Detail = TargetNotRun, why
		} else {
			t.Status, t.Detail = noWorse(s.Key, ps[0], ps[1])
		}
		out = append(out, t)
	}
	t := Target{ID: "c", Scenario: ScenarioHetero, Claim: fmt.Sprintf("%s p90 latency at least %gx lower than %s's (mean over seeds)", recommended, TargetHeteroP90, loadAware)}
	if ps, why := policies(ScenarioHetero, recommended, loadAware); why != "" {
		t.Status, t.Detail = TargetNotRun, why
	} else {
		t.Status, t.Detail = p90Lower(ps[0], ps[1])
	}
	return append(out, t)
}

// nearBound checks target (a) for rec against the baseline base.
func nearBound(rec, base *PolicyStats) (TargetStatus, string) {
	var over, later, failed []string
	compared := 0
	for _, o := range rec.Runs {
		if o.Failed > 0 {
			failed = append(failed, fmt.Sprintf("order %d (%d)", o.Order, o.Failed))
		}
		if o.OverBound > TargetOverBound {
			over = append(over, fmt.Sprintf("order %d (%+.1f%%)", o.Order, 100*o.OverBound))
		}
		if b, ok := base.order(o.Order); ok {
			compared++
			if o.Total > b.Total {
				later = append(later, fmt.Sprintf("order %d (%.1f s against %.1f s)", o.Order, o.Total, b.Total))
			}
		}
	}
	if compared == 0 {
		return TargetNotRun, fmt.Sprintf("%s and %s ran no order in common", rec.Policy, base.Policy)
	}
	var problems []string
	if len(failed) > 0 {
		problems = append(problems, "requests failed on "+strings.Join(failed, ", "))
	}
	if len(over) > 0 {
		problems = append(problems, fmt.Sprintf("more than %.0f%% over the bound on %s", 100*TargetOverBound, strings.Join(over, ", ")))
	}
	if len(later) > 0 {
		problems = append(problems, fmt.Sprintf("later than %s on %s", base.Policy, strings.Join(later, ", ")))
	}
	if len(problems) > 0 {
		return TargetFail, strings.Join(problems, "; ")
	}
	var sooner []float64
	for _, o := range rec.Runs {
		if b, ok := base.order(o.Order); ok && b.Total > 0 {
			sooner = append(sooner, (b.Total-o.Total)/b.Total)
		}
	}
	s := statOf(sooner)
	return TargetPass, fmt.Sprintf("%+.1f%% to %+.1f%% over the bound on %d orders; %.1f%% to %.1f%% sooner than %s on %d",
		100*rec.OverBound.Min, 100*rec.OverBound.Max, len(rec.Runs), 100*s.Min, 100*s.Max, base.Policy, compared)
}

// noWorse checks target (b): la's mean key figure at most base's.
func noWorse(key string, la, base *PolicyStats) (TargetStatus, string) {
	a, b := la.key(key).Mean, base.key(key).Mean
	vs := compareKey(key, a, b)
	if la.Failed > base.Failed {
		return TargetFail, fmt.Sprintf("%s failed %d requests, %s %d", la.Policy, la.Failed, base.Policy, base.Failed)
	}
	if a > b {
		return TargetFail, fmt.Sprintf("%s is worse than %s on average: %s %.1f s against %.1f s (%s)", la.Policy, base.Policy, keyName(key), a, b, vs)
	}
	return TargetPass, fmt.Sprintf("%s %.1f s against %.1f s on average (%s)", keyName(key), a, b, vs)
}

// p90Lower checks target (c): rec's mean p90 TargetHeteroP90 times lower
// than la's.
func p90Lower(rec, la *PolicyStats) (TargetStatus, string) {
	if rec.Failed > 0 {
		return TargetFail, fmt.Sprintf("%s failed %d requests", rec.Policy, rec.Failed)
	}
	a, b := rec.P90.Mean, la.P90.Mean
	detail := fmt.Sprintf("p90 %.2f s (%.2f–%.2f) against %s's %.2f s (%.2f–%.2f)", a, rec.P90.Min, rec.P90.Max, la.Policy, b, la.P90.Min, la.P90.Max)
	if a > 0 {
		detail += fmt.Sprintf(": %.2fx lower", b/a)
	}
	if a <= 0 || b < TargetHeteroP90*a {
		return TargetFail, detail
	}
	return TargetPass, detail
}

// compareKey says how a compares with b: "12.3% sooner" for totals,
// "2.1x lower" for latencies.
func compareKey(key string, a, b float64) string {
	if key == KeyP90 {
		if a <= 0 {
			return "—"
		}
		if a > b {
			return fmt.Sprintf("%.2fx higher", a/b)
		}
		return fmt.Sprintf("%.2fx lower", b/a)
	}
	if b <= 0 {
		return "—"
	}
	if a > b {
		return fmt.Sprintf("%.1f%% later", 100*(a-b)/b)
	}
	return fmt.Sprintf("%.1f%% sooner", 100*(b-a)/b)
}

func keyName(key string) string {
	if key == KeyP90 {
		return "p90 latency"
	}
	return "total time"
}

// Write saves the report into dir: each run's results JSON and queue
// chart (shared scales per scenario), a chart per scenario of its key
// figure on every order (orders-<scenario>.png), report.json and
// report.md. It returns the markdown.
func (r *RoutingReport) Write(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("report: %w", err)
	}
	for _, s := range r.Scenarios {
		var runs []*RunResult
		for _, run := range r.Runs {
			if run.Spec.Scenario == s.Scenario {
				runs = append(runs, run)
			}
		}
		if err := writeRuns(dir, runs, r.Charts); err != nil {
			return "", err
		}
		name := "orders-" + s.Scenario + ".png"
		if err := writeChart(dir, name, s.ordersChart()); err != nil {
			return "", err
		}
		r.Charts["orders-"+s.Scenario] = name
	}
	return writeReport(dir, r)
}

// ordersChart draws the scenario's key figure per order, a line per
// policy (and the ideal bound, for total times).
func (s *ScenarioStats) ordersChart() *chart.Chart {
	c := &chart.Chart{
		Title:  fmt.Sprintf("%s fleet (%s): %s per arrival order", s.Scenario, s.Fleet.SpeedList(), keyName(s.Key)),
		XLabel: "arrival order (0: the workload's own)", YLabel: keyName(s.Key) + " (s)",
	}
	if s.Scenario == ScenarioHetero {
		c.XLabel = "arrival order (seed of the Poisson process)"
	}
	if n := len(s.Orders); n > 0 {
		// room for the last order's points, whole-number ticks
		c.XMax, c.XStep = float64(s.Orders[n-1])+0.25, 1
	}
	for _, p := range s.Policies {
		line := chart.Series{Name: p.Policy, Points: true}
		for _, o := range p.Runs {
			line.X, line.Y = append(line.X, float64(o.Order)), append(line.Y, o.key(s.Key))
		}
		c.Series = append(c.Series, line)
	}
	if s.Key == KeyTotal && len(s.Policies) > 0 {
		bound := chart.Series{Name: "ideal bound", Points: true}
		for _, o := range s.Policies[0].Runs {
			bound.X, bound.Y = append(bound.X, float64(o.Order)), append(bound.Y, o.Bound)
		}
		c.Series = append(c.Series, bound)
	}
	return c
}

// Markdown writes the report: the setup, the targets, a table and chart
// per scenario, and every run in an appendix.
func (r *RoutingReport) Markdown(w io.Writer) {
	fmt.Fprintf(w, "# %s\n\n", r.Title)
	first := r.Runs[0].Spec
	var policies []string
	for _, run := range r.Runs {
		if !slices.Contains(policies, run.Spec.Stack.Policy) {
			policies = append(policies, run.Spec.Stack.Policy)
		}
	}
	fmt.Fprintf(w, "Policies: %s (recommended: %s). Simulator at speed %g; %d picker replica(s)", strings.Join(policies, ", "), r.Recommended, first.Fleet.Speed, first.Stack.Pickers)
	if n := first.NoisyNeighbour; n > 0 {
		fmt.Fprintf(w, "; a noisy neighbour burning %s beside every stack", threads(n))
	} else {
		fmt.Fprint(w, "; no noisy neighbour")
	}
	fmt.Fprintln(w, ". Order 0 is the workload's own arrival order; order k > 0 sends the same requests in the k-th seeded shuffle (requests due together leave in another order, the burst's requests trade launch times); on the hetero fleet each order is a seed of the Poisson process. Ranges are mean (min–max) over the orders; times are simulated seconds.")
	if lo, hi, ok := r.loadSpan(); ok {
		fmt.Fprintf(w, "\nMachine load average (1 min) over the runs: %.2f to %.2f (per run in the appendix).\n", lo, hi)
	}

	fmt.Fprintln(w, "\n## Targets")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| | fleet | target | result | detail |")
	fmt.Fprintln(w, "|---|---|---|---|---|")
	for _, t := range r.Targets {
		status := string(t.Status)
		if t.Status != TargetNotRun {
			status = "**" + status + "**"
		}
		fmt.Fprintf(w, "| (%s) | %s | %s | %s | %s |\n", t.ID, t.Scenario, t.Claim, status, t.Detail)
	}

	for _, s := range r.Scenarios {
		fmt.Fprintf(w, "\n## Fleet %s: %d pods at speeds %s\n\n", s.Scenario, s.Fleet.Pods, s.Fleet.SpeedList())
		fmt.Fprintf(w, "Workload %s: %d requests, %d orders. Ideal lower bound %s. Key figure: %s.",
			s.Workload, s.Requests, len(s.Orders), statText(s.Bound, "%.1f s"), keyName(s.Key))
		if s.Key == KeyP90 {
			fmt.Fprintf(w, " Offered load %s of the fleet's capacity (ideal bound's cost model).", statText(Stat{100 * s.Load.Mean, 100 * s.Load.Min, 100 * s.Load.Max}, "%.0f%%"))
		}
		fmt.Fprintln(w)
		fmt.Fprintln(w)
		base := s.policy(r.Baseline)
		cols := []string{"total", "over ideal", "p90", "p99"}
		if s.Key == KeyP90 {
			cols = []string{"p90", "p99", "total", "over ideal"}
		}
		fmt.Fprintf(w, "| policy | %s | %s vs %s | %s | %s | %s | failed |\n", cols[0], cols[0], r.Baseline, cols[1], cols[2], cols[3])
		fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|")
		for i := range s.Policies {
			p := &s.Policies[i]
			cells := map[string]string{
				"total": statText(p.Total, "%.1f s"), "over ideal": statText(Stat{100 * p.OverBound.Mean, 100 * p.OverBound.Min, 100 * p.OverBound.Max}, "%+.1f%%"),
				"p90": statText(p.P90, "%.2f s"), "p99": statText(p.P99, "%.2f s"),
			}
			vs := "—"
			if base != nil && p != base {
				vs = compareKey(s.Key, p.key(s.Key).Mean, base.key(s.Key).Mean)
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %d |\n", p.Policy, cells[cols[0]], vs, cells[cols[1]], cells[cols[2]], cells[cols[3]], p.Failed)
		}
		if c, ok := r.Charts["orders-"+s.Scenario]; ok {
			fmt.Fprintf(w, "\n![%s: %s per order](%s)\n", s.Scenario, keyName(s.Key), c)
		}
		r.predictionErrors(w, s.Scenario)
	}

	fmt.Fprintln(w, "\n## Appendix: every run")
	fmt.Fprintln(w)
	fmt.Fprintf(w, "| fleet | order | policy | total | vs %s | over ideal | bound | avg | p50 | p90 | p99 | ok | failed | requests per pod | load avg at start → end |\n", r.Baseline)
	fmt.Fprintln(w, "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|")
	for i, row := range r.Rows {
		vs := "—"
		if row.Policy != r.Baseline && row.BaselineTotal > 0 {
			vs = compareKey(KeyTotal, row.Total, row.BaselineTotal)
		}
		fmt.Fprintf(w, "| %s | %d | %s | %.1f s | %s | %+.1f%% | %.1f s | %.2f s | %.2f s | %.2f s | %.2f s | %d | %d | %s | %s |\n",
			row.Scenario, row.Order, row.Policy, row.Total, vs, 100*row.OverBound, row.Bound, row.Avg, row.P50, row.P90, row.P99, row.Count, row.Failed,
			perPodText(row.PerPod), loadRange(r.Runs[i]))
	}
	fmt.Fprintln(w, "\nRequests pending per pod (waiting + running) over time, per run:")
	fmt.Fprintln(w)
	for _, run := range r.Runs {
		if c, ok := r.Charts[run.Spec.Name]; ok {
			fmt.Fprintf(w, "- [%s](%s)\n", run.Spec.Name, c)
		}
	}
}

// predictionErrors writes, for the scenario's runs whose picker predicted
// latencies, the median absolute percentage error of each kind of
// prediction: mean, least and greatest over the orders.
func (r *RoutingReport) predictionErrors(w io.Writer, scenario string) {
	type key struct{ policy, kind string }
	medians := map[key][]float64{}
	var policies []string
	for _, run := range r.Runs {
		if run.Spec.Scenario != scenario {
			continue
		}
		for _, kind := range predictionKinds {
			if pe := run.PredictionError[kind]; pe != nil {
				k := key{run.Spec.Stack.Policy, kind}
				if !slices.Contains(policies, k.policy) {
					policies = append(policies, k.policy)
				}
				medians[k] = append(medians[k], 100*pe.P50)
			}
		}
	}
	if len(policies) == 0 {
		return
	}
	fmt.Fprintln(w, "\nLatency predictions, median absolute percentage error over each run's workload (warm-up left out); mean (least–greatest) over the orders:")
	fmt.Fprintln(w)
	for _, p := range policies {
		var parts []string
		for _, kind := range predictionKinds {
			if xs := medians[key{p, kind}]; len(xs) > 0 {
				parts = append(parts, kind+" "+statText(statOf(xs), "%.1f%%"))
			}
		}
		fmt.Fprintf(w, "- %s: %s\n", p, strings.Join(parts, ", "))
	}
}

// loadSpan is the least and greatest one-minute load average read.
func (r *RoutingReport) loadSpan() (lo, hi float64, ok bool) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, run := range r.Runs {
		for _, l := range []*LoadAvg{run.LoadStart, run.LoadEnd} {
			if l != nil {
				lo, hi, ok = min(lo, l[0]), max(hi, l[0]), true
			}
		}
	}
	return lo, hi, ok
}

// statText formats a stat as "mean (min–max)" in the format given.
func statText(s Stat, format string) string {
	return fmt.Sprintf(format+" ("+format+"–"+format+")", s.Mean, s.Min, s.Max)
}

// perPodText is the requests each pod served, in pod name order
// ("pod-a 3, pod-b 1").
func perPodText(perPod map[string]int) string {
	pods := make([]string, 0, len(perPod))
	for p := range perPod {
		pods = append(pods, p)
	}
	slices.Sort(pods)
	parts := make([]string, len(pods))
	for i, p := range pods {
		parts[i] = fmt.Sprintf("%s %d", p, perPod[p])
	}
	return strings.Join(parts, ", ")
}
