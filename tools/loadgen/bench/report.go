package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hermod/hermod/tools/loadgen/chart"
	"github.com/hermod/hermod/tools/loadgen/runner"
	"github.com/hermod/hermod/tools/loadgen/workload"
)

// Report compares runs of one workload.
type Report struct {
	Title string `json:"title"`
	// Baseline is the run the others are compared to.
	Baseline string       `json:"baseline"`
	Runs     []*RunResult `json:"runs"`
	// Rows are the comparison table, in run order.
	Rows []Row `json:"rows"`
	// Charts are the PNG files written, by run name.
	Charts map[string]string `json:"charts"`
}

// Row is one run's line of the report.
type Row struct {
	Run    string  `json:"run"`
	Policy string  `json:"policy"`
	Total  float64 `json:"total_s"`
	Avg    float64 `json:"avg_s"`
	P50    float64 `json:"p50_s"`
	P90    float64 `json:"p90_s"`
	P95    float64 `json:"p95_s"`
	P99    float64 `json:"p99_s"`
	Count  int     `json:"count"`
	Failed int     `json:"failed"`
	// VsBaseline is how much sooner than the baseline the run finished,
	// as a fraction of the baseline's total (0.18: 18% sooner).
	VsBaseline float64 `json:"vs_baseline"`
	// OverBound is how far above the ideal lower bound the total is, as a
	// fraction of the bound (0.05: 5% above).
	OverBound float64 `json:"over_bound"`
	// Bound is the ideal lower bound of the run's workload and fleet.
	Bound float64 `json:"bound_s"`
	// PerPod is how many requests each pod served.
	PerPod map[string]int `json:"per_pod"`
	// Streamed runs: time to first token, throughput and prefix-cache hit
	// rate.
	TTFTP50    float64 `json:"ttft_p50_s,omitempty"`
	TTFTP90    float64 `json:"ttft_p90_s,omitempty"`
	Throughput float64 `json:"throughput_rps"`
	OutputTPS  float64 `json:"output_tokens_per_s"`
	HitRate    float64 `json:"prefix_hit_rate"`
}

// NewReport compares runs against the baseline run (by name; empty: the
// first run).
func NewReport(title, baseline string, runs []*RunResult) (*Report, error) {
	if len(runs) == 0 {
		return nil, fmt.Errorf("report: no runs")
	}
	if baseline == "" {
		baseline = runs[0].Spec.Name
	}
	i := slices.IndexFunc(runs, func(r *RunResult) bool { return r.Spec.Name == baseline })
	if i < 0 {
		return nil, fmt.Errorf("report: no run named %q", baseline)
	}
	base := runs[i].Results.Summary.TotalE2E
	r := &Report{Title: title, Baseline: baseline, Runs: runs, Charts: map[string]string{}}
	for _, run := range runs {
		r.Rows = append(r.Rows, newRow(run, base))
	}
	return r, nil
}

// newRow is a run's line, compared with a baseline's total (0: none).
func newRow(run *RunResult, base float64) Row {
	s := run.Results.Summary
	row := Row{
		Run: run.Spec.Name, Policy: run.Spec.Stack.Policy, Total: s.TotalE2E, Avg: s.Avg, P50: s.P50, P90: s.P90, P95: s.P95, P99: s.P99,
		Count: s.Count, Failed: s.Failed, Bound: run.Bound.Total, PerPod: s.PerPod,
		TTFTP50: s.TTFTP50, TTFTP90: s.TTFTP90, Throughput: s.Throughput, OutputTPS: s.OutputTokens, HitRate: s.HitRate,
	}
	if base > 0 {
		row.VsBaseline = (base - s.TotalE2E) / base
	}
	if run.Bound.Total > 0 {
		row.OverBound = (s.TotalE2E - run.Bound.Total) / run.Bound.Total
	}
	return row
}

// writeRuns saves each run's results JSON and its queue chart (the runs'
// charts on shared scales) into dir, recording the charts' file names by
// run in charts.
func writeRuns(dir string, runs []*RunResult, charts map[string]string) error {
	xMax, yMax := queueScales(runs)
	for _, run := range runs {
		if err := WriteResult(dir, run); err != nil {
			return err
		}
		name, err := writeQueueChart(dir, run, xMax, yMax)
		if err != nil {
			return err
		}
		if name != "" {
			charts[run.Spec.Name] = name
		}
	}
	return nil
}

// Write saves the report into dir: each run's results JSON, a queue chart
// per run (queue-<run>.png, shared scales), report.json and report.md. It
// returns the markdown.
func (r *Report) Write(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("report: %w", err)
	}
	if err := writeRuns(dir, r.Runs, r.Charts); err != nil {
		return "", err
	}
	if r.Runs[0].Spec.Stream {
		if err := r.writeTTFTChart(dir); err != nil {
			return "", err
		}
	}
	return writeReport(dir, r)
}

// markdownReport is a report that writes itself as markdown.
type markdownReport interface {
	Markdown(w io.Writer)
}

// writeReport saves r into dir as report.json and report.md, and returns
// the markdown.
func writeReport(dir string, r markdownReport) (string, error) {
	if err := writeJSON(filepath.Join(dir, "report.json"), r); err != nil {
		return "", err
	}
	var md strings.Builder
	r.Markdown(&md)
	if err := os.WriteFile(filepath.Join(dir, "report.md"), []byte(md.String()), 0o644); err != nil {
		return "", fmt.Errorf("report: %w", err)
	}
	return md.String(), nil
}

// Markdown writes the report: the reference's table for every run, the
// ideal bound, and where the charts are.
func (r *Report) Markdown(w io.Writer) {
	fmt.Fprintf(w, "# %s\n\n", r.Title)
	first := r.Runs[0]
	f := first.Spec.Fleet
	fmt.Fprintf(w, "Workload %s: %d requests. Fleet: %d pods of %s", first.Spec.Workload.Name, len(first.Results.Requests), f.Pods, f.Model)
	if !uniformSpeed(f) {
		fmt.Fprintf(w, " at speeds %s", f.SpeedList())
	}
	fmt.Fprintf(w, ", simulator at speed %g; %d picker replica(s)", f.Speed, first.Spec.Stack.Pickers)
	if n := first.Spec.Stack.GoMaxProcs; n > 0 {
		fmt.Fprintf(w, "; every process with GOMAXPROCS=%d", n)
	}
	if n := first.Spec.NoisyNeighbour; n > 0 {
		fmt.Fprintf(w, "; a noisy neighbour burning %s beside every stack", threads(n))
	}
	fmt.Fprintln(w, ". Times are simulated seconds.")
	fmt.Fprintln(w)
	fmt.Fprintf(w, "| policy | total wall-clock | vs %s | over ideal | avg | p50 | p90 | p95 | p99 | ok | failed |\n", r.Baseline)
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, row := range r.Rows {
		vs := "—"
		if row.Run != r.Baseline {
			vs = fmt.Sprintf("%.1f%% sooner", 100*row.VsBaseline)
		}
		fmt.Fprintf(w, "| %s | %.1f s | %s | %+.1f%% | %.2f s | %.2f s | %.2f s | %.2f s | %.2f s | %d | %d |\n",
			row.Policy, row.Total, vs, 100*row.OverBound, row.Avg, row.P50, row.P90, row.P95, row.P99, row.Count, row.Failed)
	}
	if first.Spec.Stream {
		fmt.Fprintf(w, "\n| policy | TTFT p50 | TTFT p90 | p90 vs %s | throughput | output tokens/s | prefix cache hit rate |\n", r.Baseline)
		fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|")
		base := r.Rows[slices.IndexFunc(r.Rows, func(row Row) bool { return row.Run == r.Baseline })].TTFTP90
		for _, row := range r.Rows {
			ratio := "—"
			if row.Run != r.Baseline && row.TTFTP90 > 0 {
				ratio = fmt.Sprintf("%.1fx lower", base/row.TTFTP90)
			}
			fmt.Fprintf(w, "| %s | %.3f s | %.3f s | %s | %.2f req/s | %.0f | %.1f%% |\n", row.Policy, row.TTFTP50, row.TTFTP90, ratio, row.Throughput, row.OutputTPS, 100*row.HitRate)
		}
	}
	b := first.Bound
	fmt.Fprintf(w, "\nIdeal lower bound: %.1f s = max(work %.0f pod-s / capacity %g = %.1f s, latest request alone %.1f s [%s]).\n",
		b.Total, b.Work, b.Capacity, b.FleetLimit, b.RequestLimit, b.RequestLimitID)
	lagHeader := false
	for _, run := range r.Runs {
		if l := run.DecisionLag; l != nil {
			if !lagHeader {
				fmt.Fprintln(w, "\nDecisions reaching the other pickers (wall clock; meanwhile they do not count the request):")
				fmt.Fprintln(w)
				lagHeader = true
			}
			fmt.Fprintf(w, "- %s: p50 %.2f ms, p90 %.2f ms, p99 %.2f ms over %d folds\n", run.Spec.Stack.Policy, 1e3*l.P50, 1e3*l.P90, 1e3*l.P99, l.Count)
		}
	}
	fmt.Fprintln(w, "\nMachine load average (1, 5, 15 min) at the start and the end of each run:")
	fmt.Fprintln(w)
	for _, run := range r.Runs {
		fmt.Fprintf(w, "- %s: %s\n", run.Spec.Stack.Policy, loadRange(run))
	}
	fmt.Fprintln(w, "\nRequests per pod:")
	fmt.Fprintln(w)
	for _, row := range r.Rows {
		fmt.Fprintf(w, "- %s: %s\n", row.Policy, perPodText(row.PerPod))
	}
	if len(r.Charts) > 0 {
		if c, ok := r.Charts[ttftChart]; ok {
			fmt.Fprintf(w, "\nTime to first token, distribution per policy:\n\n![TTFT](%s)\n", c)
		}
		fmt.Fprintln(w, "\nRequests pending per pod (waiting + running) over time:")
		fmt.Fprintln(w)
		for _, run := range r.Runs {
			if c, ok := r.Charts[run.Spec.Name]; ok {
				fmt.Fprintf(w, "![%s](%s)\n", run.Spec.Stack.Policy, c)
			}
		}
	}
}

// writeQueueChart draws the run's queues (queue-<run>.png in dir) on the
// given scales and returns the file's name ("" when there are no
// queues).
func writeQueueChart(dir string, run *RunResult, xMax, yMax float64) (string, error) {
	if len(run.Results.Queues) == 0 {
		return "", nil
	}
	c := &chart.Chart{
		Title:  fmt.Sprintf("%s: requests pending per pod, waiting + running (%s workload, %d requests)", run.Spec.Stack.Policy, run.Spec.Workload.Name, len(run.Results.Requests)),
		XLabel: "simulated time (s)", YLabel: "pending", XMax: xMax, YMax: max(1.05*yMax, 1),
		Marks: []chart.Mark{{X: run.Results.Summary.TotalE2E, Label: fmt.Sprintf("all done %.0fs", run.Results.Summary.TotalE2E)}},
	}
	if run.Spec.Scenario != "" {
		c.Title = fmt.Sprintf("%s, %s fleet (%s), order %d: requests pending per pod, waiting + running", run.Spec.Stack.Policy, run.Spec.Scenario, run.Spec.Fleet.SpeedList(), run.Spec.Order)
	}
	if b := run.Bound.Total; b > 0 {
		c.Marks = append(c.Marks, chart.Mark{X: b, Label: fmt.Sprintf("bound %.0fs", b)})
	}
	for _, q := range run.Results.Queues {
		s := chart.Series{Name: q.Pod}
		for _, p := range q.Samples {
			s.X, s.Y = append(s.X, p.T), append(s.Y, p.Waiting+p.Running)
		}
		c.Series = append(c.Series, s)
	}
	name := "queue-" + run.Spec.Name + ".png"
	return name, writeChart(dir, name, c)
}

// queueScales are the largest time and queue length of the runs' queue
// samples: shared scales for their charts.
func queueScales(runs []*RunResult) (xMax, yMax float64) {
	for _, run := range runs {
		xMax = max(xMax, run.Results.Summary.TotalE2E)
		for _, q := range run.Results.Queues {
			for _, s := range q.Samples {
				xMax, yMax = max(xMax, s.T), max(yMax, s.Waiting+s.Running)
			}
		}
	}
	return xMax, yMax
}

// writeChart draws c into dir/name.
func writeChart(dir, name string, c *chart.Chart) error {
	f, err := os.Create(filepath.Join(dir, name))
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	err = c.WritePNG(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("report: chart %s: %w", name, err)
	}
	return nil
}

// WriteResult saves a run's results as dir/results-<run>.json, the file
// ReadResult reads.
func WriteResult(dir string, run *RunResult) error {
	return writeJSON(filepath.Join(dir, "results-"+run.Spec.Name+".json"), run)
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return nil
}

// uniformSpeed reports whether every pod of f runs at speed 1.
func uniformSpeed(f Fleet) bool {
	for _, s := range f.PodSpeeds() {
		if s != 1 {
			return false
		}
	}
	return true
}

// loadRange is the run's load averages, "start -> end".
func loadRange(run *RunResult) string {
	show := func(l *LoadAvg) string {
		if l == nil {
			return "?"
		}
		return l.String()
	}
	return show(run.LoadStart) + " → " + show(run.LoadEnd)
}

// ReadResult loads a run's results saved by Report.Write.
func ReadResult(path string) (*RunResult, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("results: %w", err)
	}
	var r RunResult
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("results %s: %w", path, err)
	}
	if r.Results == nil && r.Spec.Workload == nil {
		// hermod-loadgen --save-json: the results alone, named after the file
		var res runner.Results
		if err := json.Unmarshal(b, &res); err == nil && len(res.Requests) > 0 {
			name := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
			return &RunResult{Spec: Spec{Name: name, Stack: Stack{Policy: name}, Workload: &workload.Workload{Name: res.Workload}}, Results: &res}, nil
		}
	}
	if r.Results == nil || r.Spec.Workload == nil {
		return nil, fmt.Errorf("results %s: neither a hermod-bench run's results nor hermod-loadgen --save-json results", path)
	}
	return &r, nil
}

// ttftChart names the TTFT distribution chart in Report.Charts.
const ttftChart = "ttft"

// writeTTFTChart draws every run's TTFT distribution (share of requests
// with a TTFT at most x) on one chart.
func (r *Report) writeTTFTChart(dir string) error {
	c := &chart.Chart{Title: "time to first token: share of requests at most x", XLabel: "TTFT (simulated s)", YLabel: "share", YMax: 1}
	var xMax float64
	for _, run := range r.Runs {
		var ttft []float64
		for _, q := range run.Results.Requests {
			if q.OK() && q.TTFT != nil {
				ttft = append(ttft, *q.TTFT)
			}
		}
		if len(ttft) == 0 {
			continue
		}
		slices.Sort(ttft)
		// the 99th percentile bounds the axis: a few outliers would
		// flatten the curves
		xMax = max(xMax, ttft[len(ttft)*99/100])
		s := chart.Series{Name: run.Spec.Stack.Policy}
		for i, v := range ttft {
			s.X, s.Y = append(s.X, v), append(s.Y, float64(i+1)/float64(len(ttft)))
		}
		c.Series = append(c.Series, s)
	}
	if len(c.Series) == 0 {
		return nil
	}
	c.XMax = xMax
	name := "ttft-cdf.png"
	if err := writeChart(dir, name, c); err != nil {
		return err
	}
	r.Charts[ttftChart] = name
	return nil
}
