package chartcheck

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// dashboardDir holds the chart's Grafana dashboards (rendered into
// ConfigMaps by templates/dashboards.yaml).
const dashboardDir = "../hermod/dashboards"

// metricRepoRoot is the Go workspace's root, whose sources define the metrics.
const metricRepoRoot = "../../.."

// metricSources are the trees whose Go sources define the metrics the
// dashboards may query: Hermod's services and libraries, and vllm-sim,
// which exports vLLM's metric names.
var metricSources = []string{"services", "libs", "tools/vllm-sim"}

type grafanaDashboard struct {
	Title         string         `json:"title"`
	UID           string         `json:"uid"`
	SchemaVersion int            `json:"schemaVersion"`
	Panels        []grafanaPanel `json:"panels"`
	Templating    struct {
		List []grafanaVariable `json:"list"`
	} `json:"templating"`
}

type grafanaPanel struct {
	ID         *int               `json:"id"`
	Type       string             `json:"type"`
	Title      string             `json:"title"`
	Datasource *grafanaDatasource `json:"datasource"`
	Targets    []grafanaTarget    `json:"targets"`
	Panels     []grafanaPanel     `json:"panels"` // a row's (collapsed) panels
}

type grafanaTarget struct {
	RefID      string             `json:"refId"`
	Expr       string             `json:"expr"`
	Datasource *grafanaDatasource `json:"datasource"`
}

type grafanaDatasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type grafanaVariable struct {
	Name       string             `json:"name"`
	Type       string             `json:"type"`
	Query      json.RawMessage    `json:"query"`
	Datasource *grafanaDatasource `json:"datasource"`
}

// query is a variable's query: a string, or an object with a query field.
func (v grafanaVariable) query() string {
	var s string
	if json.Unmarshal(v.Query, &s) == nil {
		return s
	}
	var o struct {
		Query string `json:"query"`
	}
	_ = json.Unmarshal(v.Query, &o)
	return o.Query
}

// usesVariable says whether a panel's or target's data source is the
// dashboard's datasource variable.
func usesVariable(d *grafanaDatasource) bool {
	return d != nil && (d.UID == "${datasource}" || d.UID == "$datasource") && (d.Type == "" || d.Type == "prometheus")
}

func TestDashboards(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join(dashboardDir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(paths, filepath.Join(dashboardDir, "hermod-overview.json")) {
		t.Fatalf("no hermod-overview.json among %v", paths)
	}
	known := knownMetrics(t)
	for _, p := range paths {
		t.Run(filepath.Base(p), func(t *testing.T) { checkDashboard(t, p, known) })
	}
}

func checkDashboard(t *testing.T, path string, known map[string]bool) {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var d grafanaDashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	if d.Title == "" || d.UID == "" {
		t.Errorf("title %q, uid %q: both required", d.Title, d.UID)
	}
	if d.SchemaVersion < 36 {
		t.Errorf("schemaVersion %d: want a current Grafana schema (>= 36)", d.SchemaVersion)
	}

	vars := map[string]grafanaVariable{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v
	}
	if v, ok := vars["datasource"]; !ok || v.Type != "datasource" || v.query() != "prometheus" {
		t.Errorf("no datasource variable of type datasource for prometheus: %+v", v)
	}
	if _, ok := vars["pool"]; !ok {
		t.Error("no pool variable")
	}

	var exprs []string // "where: expr"
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		if !usesVariable(v.Datasource) {
			t.Errorf("variable %s: datasource %+v is not ${datasource}", v.Name, v.Datasource)
		}
		exprs = append(exprs, "variable "+v.Name+": "+v.query())
	}

	ids := map[int]string{}
	var walk func(ps []grafanaPanel)
	walk = func(ps []grafanaPanel) {
		for _, p := range ps {
			where := p.Type + " " + strconv.Quote(p.Title)
			switch {
			case p.ID == nil:
				t.Errorf("%s has no id", where)
			case ids[*p.ID] != "":
				t.Errorf("%s has id %d, as has %s", where, *p.ID, ids[*p.ID])
			default:
				ids[*p.ID] = where
			}
			if p.Type == "row" {
				walk(p.Panels)
				continue
			}
			if !usesVariable(p.Datasource) {
				t.Errorf("%s: datasource %+v is not ${datasource}", where, p.Datasource)
			}
			if len(p.Targets) == 0 {
				t.Errorf("%s has no query", where)
			}
			for _, tg := range p.Targets {
				if tg.Datasource != nil && !usesVariable(tg.Datasource) {
					t.Errorf("%s query %s: datasource %+v is not ${datasource}", where, tg.RefID, tg.Datasource)
				}
				if strings.TrimSpace(tg.Expr) == "" {
					t.Errorf("%s query %s: empty expr", where, tg.RefID)
					continue
				}
				exprs = append(exprs, where+" query "+tg.RefID+": "+tg.Expr)
			}
		}
	}
	walk(d.Panels)
	if len(ids) == 0 {
		t.Fatal("no panels")
	}

	used := map[string]bool{}
	for _, e := range exprs {
		where, expr, _ := strings.Cut(e, ": ")
		names := promQLMetrics(expr)
		if len(names) == 0 && !strings.HasPrefix(where, "variable ") {
			t.Errorf("%s: no metric in %q", where, expr)
		}
		for _, n := range names {
			used[n] = true
			if !isKnownMetric(n, known) {
				t.Errorf("%s: metric %s is defined nowhere in %v (renamed?)\n  %s", where, n, metricSources, expr)
			}
		}
	}
	t.Logf("%d panels, %d queries, %d metrics", len(ids), len(exprs), len(used))
}

// isKnownMetric accepts a defined metric, or a histogram's or summary's series
// (_bucket, _sum, _count) of one.
func isKnownMetric(name string, known map[string]bool) bool {
	if known[name] {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && known[base] {
			return true
		}
	}
	return false
}

var (
	// Name: "metric_name" in prometheus.*Opts literals
	nameLiteral = regexp.MustCompile(`\bName:\s*"([a-zA-Z_:][a-zA-Z0-9_:]*)"`)
	// Name: SomeConst or Name: pkg.SomeConst, resolved through constDecl
	nameIdent = regexp.MustCompile(`\bName:\s*(?:[A-Za-z_][A-Za-z0-9_]*\.)?([A-Za-z_][A-Za-z0-9_]*)\s*[,}\n]`)
	constDecl = regexp.MustCompile(`\b([A-Za-z_][A-Za-z0-9_]*)\s*=\s*"([a-zA-Z_:][a-zA-Z0-9_:]*)"`)
	// prometheus.NewDesc("metric_name", ...) in custom collectors
	descLiteral = regexp.MustCompile(`NewDesc\(\s*"([a-zA-Z_:][a-zA-Z0-9_:]*)"`)
	// telemetry.NewCounter("metric_name", ...) and the other constructors,
	// with a literal or a constant name
	ctorLiteral = regexp.MustCompile(`telemetry\.New(?:Counter|Gauge|Histogram)(?:Vec)?\(\s*"([a-zA-Z_:][a-zA-Z0-9_:]*)"`)
	ctorIdent   = regexp.MustCompile(`telemetry\.New(?:Counter|Gauge|Histogram)(?:Vec)?\(\s*(?:[A-Za-z_][A-Za-z0-9_]*\.)?([A-Za-z_][A-Za-z0-9_]*)\s*,`)
	// vLLM's names, whatever helper registers them
	vllmLiteral = regexp.MustCompile(`"(vllm:[a-zA-Z0-9_:]+)"`)
)

// knownMetrics scans the non-test Go sources of metricSources for metric
// names, so that renaming a metric in the code fails this test until the
// dashboards follow.
func knownMetrics(t *testing.T) map[string]bool {
	t.Helper()
	root, err := filepath.Abs(metricRepoRoot)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.work")); err != nil {
		t.Fatalf("%s is not the workspace root: %v", root, err)
	}
	known := map[string]bool{}
	consts := map[string][]string{}
	var idents []string
	for _, dir := range metricSources {
		err := filepath.WalkDir(filepath.Join(root, dir), func(p string, e fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if e.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return nil
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			src := string(b)
			for _, re := range []*regexp.Regexp{nameLiteral, descLiteral, vllmLiteral, ctorLiteral} {
				for _, m := range re.FindAllStringSubmatch(src, -1) {
					known[m[1]] = true
				}
			}
			for _, re := range []*regexp.Regexp{nameIdent, ctorIdent} {
				for _, m := range re.FindAllStringSubmatch(src, -1) {
					idents = append(idents, m[1])
				}
			}
			for _, m := range constDecl.FindAllStringSubmatch(src, -1) {
				consts[m[1]] = append(consts[m[1]], m[2])
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range idents {
		for _, v := range consts[id] {
			known[v] = true
		}
	}
	// The scan must see the metrics every dashboard starts from; if it
	// does not, the scan (not the dashboard) is broken.
	for _, anchor := range []string{"inference_extension_scheduler_e2e_duration_seconds", "hermod_gateway_requests_total",
		"vllm:num_requests_waiting", "hermod_collector_staleness_seconds", "hermod_picker_routing_decisions_total"} {
		if !known[anchor] {
			t.Fatalf("the source scan found no %s (%d names): fix knownMetrics", anchor, len(known))
		}
	}
	return known
}

var (
	promString   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'`)
	promMatchers = regexp.MustCompile(`\{[^}]*\}`)
	promRange    = regexp.MustCompile(`\[[^\]]*\]`)
	promGrouping = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	grafanaVar   = regexp.MustCompile(`\$\{[^}]*\}|\$[A-Za-z_][A-Za-z0-9_]*`)
	labelValues  = regexp.MustCompile(`^\s*label_values\(\s*(.*?)\s*(?:,[^,]*)?\)\s*$`)
	promToken    = regexp.MustCompile(`[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?[a-zA-Z]*|[A-Za-z_:][A-Za-z0-9_:]*(\s*\()?`)
	promKeywords = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
		"bool": true, "and": true, "or": true, "unless": true, "offset": true, "inf": true, "nan": true, "Inf": true, "NaN": true}
)

// promQLMetrics returns the metric names a PromQL expression (or a Grafana
// label_values(metric, label) variable query) selects, sorted.
func promQLMetrics(expr string) []string {
	if m := labelValues.FindStringSubmatch(expr); m != nil {
		if !strings.Contains(m[0], ",") { // label_values(label): every series
			return nil
		}
		expr = m[1]
	}
	expr = promString.ReplaceAllString(expr, `""`)
	expr = promMatchers.ReplaceAllString(expr, " ")
	expr = promRange.ReplaceAllString(expr, " ")
	expr = promGrouping.ReplaceAllString(expr, " ")
	expr = grafanaVar.ReplaceAllString(expr, " ")
	set := map[string]bool{}
	for _, m := range promToken.FindAllStringSubmatch(expr, -1) {
		tok := m[0]
		switch {
		case m[1] != "": // a function call
		case tok[0] >= '0' && tok[0] <= '9':
		case promKeywords[tok]:
		default:
			set[tok] = true
		}
	}
	out := make([]string, 0, len(set))
	for n := range set {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func TestPromQLMetrics(t *testing.T) {
	for _, c := range []struct {
		expr string
		want []string
	}{
		{`histogram_quantile(0.99, sum by (le, api) (rate(hermod_gateway_request_duration_seconds_bucket{namespace=~"$namespace"}[$__rate_interval])))`,
			[]string{"hermod_gateway_request_duration_seconds_bucket"}},
		{`sum(rate(vllm:prefix_cache_hits_total{model_name=~"$model"}[5m])) / clamp_min(sum(rate(vllm:prefix_cache_queries_total[5m])), 1e-9)`,
			[]string{"vllm:prefix_cache_hits_total", "vllm:prefix_cache_queries_total"}},
		{`a_total / on (pod) group_left (x) b_total > bool 0.5 and c offset 5m`, []string{"a_total", "b_total", "c"}},
		{`label_values(inference_pool_ready_pods{name="$pool"}, namespace)`, []string{"inference_pool_ready_pods"}},
		{`label_values(namespace)`, nil},
		{`sum by (code) (rate(x{code=~"5..", a="}"}[1m]))`, []string{"x"}},
		{`max(up{job="${job}"})`, []string{"up"}},
	} {
		if got := promQLMetrics(c.expr); !slices.Equal(got, c.want) && (len(got) != 0 || len(c.want) != 0) {
			t.Errorf("%s\n got %v\nwant %v", c.expr, got, c.want)
		}
	}
	known := map[string]bool{"h_seconds": true, "c_total": true}
	for name, want := range map[string]bool{"h_seconds_bucket": true, "h_seconds_count": true, "c_total": true, "c_total_bucket": true, "gone_total": false, "h": false} {
		if isKnownMetric(name, known) != want {
			t.Errorf("isKnown(%s) = %v", name, !want)
		}
	}
}
