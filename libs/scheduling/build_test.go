package scheduling_test

import (
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"

	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/libs/scheduling/schedulingtest"
)

func build(yaml string) (*scheduling.Scheduler, error) {
	cfg, err := scheduling.ParseConfig([]byte(yaml))
	if err != nil {
		return nil, err
	}
	return scheduling.New(cfg, scheduling.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))), scheduling.WithRandSeed(1))
}

func profileSummary(p scheduling.ResolvedProfile) string {
	var sc []string
	for _, s := range p.Scorers {
		sc = append(sc, s.Name+"x"+strconv.FormatFloat(s.Weight, 'g', -1, 64))
	}
	return fmt.Sprintf("%s: filters=%s scorers=%s picker=%s", p.Name, strings.Join(p.Filters, ","), strings.Join(sc, ","), p.Picker)
}

func TestBuildNoProfilesMakesDefault(t *testing.T) {
	s := schedulingtest.Scheduler(t, `
plugins:
- type: decode-filter
- type: test-fixed-scorer
  name: fixed
- type: response-header-handler
- type: queue-scorer
- type: random-picker
`)
	d := s.Describe()
	if len(d.SchedulingProfiles) != 1 {
		t.Fatalf("profiles = %+v", d.SchedulingProfiles)
	}
	if got, want := profileSummary(d.SchedulingProfiles[0]), "default: filters=decode-filter scorers=fixedx1,queue-scorerx1 picker=random-picker"; got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if d.ProfileHandler != scheduling.TypeSingleProfileHandler {
		t.Errorf("handler = %s", d.ProfileHandler)
	}
	last := d.Plugins[len(d.Plugins)-1]
	if last.Name != "single-profile-handler" || last.Origin != "default" {
		t.Errorf("added handler = %+v", last)
	}
}

func TestBuildProfileWithoutPicker(t *testing.T) {
	s := schedulingtest.Scheduler(t, `
plugins:
- type: queue-scorer
schedulingProfiles:
- name: only
  plugins:
  - pluginRef: queue-scorer
    weight: 2
`)
	d := s.Describe()
	if got, want := profileSummary(d.SchedulingProfiles[0]), "only: filters= scorers=queue-scorerx2 picker=max-score-picker"; got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	var picker *scheduling.ResolvedPlugin
	for i := range d.Plugins {
		if d.Plugins[i].Type == "max-score-picker" {
			picker = &d.Plugins[i]
		}
	}
	if picker == nil || picker.Origin != "default" {
		t.Fatalf("no default picker in %+v", d.Plugins)
	}
	if !strings.Contains(fmt.Sprintf("%+v", picker.Parameters), "MaxNumOfEndpoints:1") {
		t.Errorf("default picker parameters = %v", picker.Parameters)
	}

	// A declared but unreferenced max-score-picker is the one used.
	s = schedulingtest.Scheduler(t, `
plugins:
- type: queue-scorer
- type: max-score-picker
  parameters: {maxNumOfEndpoints: 3}
schedulingProfiles:
- name: only
  plugins:
  - pluginRef: queue-scorer
`)
	for _, p := range s.Describe().Plugins {
		if p.Type == "max-score-picker" && p.Origin != "plugins[1]" {
			t.Errorf("picker origin = %s, want the declared one", p.Origin)
		}
	}
}

func TestBuildWeightsAndResolvedOrder(t *testing.T) {
	s := schedulingtest.Scheduler(t, `
plugins:
- {type: by-label, parameters: {label: tier, validValues: [gold]}}
- {type: queue-scorer, name: q}
- {type: kv-cache-utilization-scorer}
- {type: max-score-picker}
schedulingProfiles:
- name: default
  plugins:
  - {pluginRef: kv-cache-utilization-scorer, weight: 0.5}
  - {pluginRef: by-label}
  - {pluginRef: q, weight: 3}
  - {pluginRef: max-score-picker}
`)
	d := s.Describe()
	if got, want := profileSummary(d.SchedulingProfiles[0]), "default: filters=by-label scorers=kv-cache-utilization-scorerx0.5,qx3 picker=max-score-picker"; got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	var names []string
	for _, p := range d.Plugins {
		names = append(names, p.Name+"@"+p.Origin)
	}
	if got, want := strings.Join(names, " "), "by-label@plugins[0] q@plugins[1] kv-cache-utilization-scorer@plugins[2] max-score-picker@plugins[3] single-profile-handler@default"; got != want {
		t.Errorf("plugins\n got  %s\n want %s", got, want)
	}
}

// The invalid configurations the issue names, plus the other build errors:
// each message names the plugin or field at fault.
func TestBuildErrors(t *testing.T) {
	cases := []struct{ name, yaml, want string }{
		{"unknown gate", "featureGates: [prepareDataPlugins, fastMode]\nplugins: [{type: queue-scorer}]",
			`featureGates[1]: unknown feature gate "fastMode" (known: flowControl, haPopulateNonLeaderDatastore, prepareDataPlugins)`},
		{"duplicate name", "plugins: [{type: queue-scorer}, {type: queue-scorer}]",
			`plugins[1] (queue-scorer): name "queue-scorer" is already used by plugins[0]`},
		{"duplicate explicit name", "plugins: [{type: queue-scorer, name: s}, {type: kv-cache-utilization-scorer, name: s}]",
			`plugins[1] (s, type kv-cache-utilization-scorer): name "s" is already used by plugins[0]`},
		{"missing pluginRef", "plugins: [{type: queue-scorer}]\nschedulingProfiles: [{name: a, plugins: [{pluginRef: queue}]}]",
			`schedulingProfiles[0].plugins[0].pluginRef: no plugin named "queue" is declared in plugins`},
		{"decider declared after the handler", `
plugins:
- type: disagg-headers-handler
- type: disagg-profile-handler
  parameters: {deciders: {prefill: pd}}
- type: prefix-based-pd-decider
  name: pd
schedulingProfiles: [{name: decode, plugins: []}, {name: prefill, plugins: []}]`,
			`plugins[1] (disagg-profile-handler): parameters.deciders.prefill: plugin "pd" is declared later (plugins[2]); declare it before this plugin`},
		{"two pickers in a profile", "plugins: [{type: max-score-picker}, {type: random-picker}]\nschedulingProfiles: [{name: a, plugins: [{pluginRef: max-score-picker}, {pluginRef: random-picker}]}]",
			`schedulingProfiles[0].plugins[1].pluginRef: profile "a" has two pickers, "max-score-picker" and "random-picker"; keep one`},
		{"blockSize without blockSizeTokens", "plugins: [{type: prefix-cache-scorer, parameters: {blockSize: 64}}]",
			`plugins[0] (prefix-cache-scorer): parameters.blockSize: is deprecated (a size in characters) and cannot be used alone; set blockSizeTokens`},
		{"bad duration", "plugins: [{type: active-request-scorer, parameters: {requestTimeout: 2 minutes}}]",
			`plugins[0] (active-request-scorer): parameters.requestTimeout: must be a duration such as "2m" or "500ms" (got "2 minutes")`},
		{"wrong parameter type", "plugins: [{type: load-aware-scorer, parameters: {threshold: high}}]",
			`plugins[0] (load-aware-scorer): parameters.threshold: must be an integer (got "high")`},
		{"unknown type", "plugins: [{type: queue-scorr}]",
			`plugins[0] (queue-scorr): unknown plugin type "queue-scorr" (did you mean "queue-scorer"?)`},
		{"unavailable type", "plugins: [{type: test-unavailable}]",
			`plugins[0] (test-unavailable): plugin type test-unavailable is not available in this build`},
		{"precise prefix without an indexer", "plugins: [{type: precise-prefix-cache-scorer, parameters: {indexerConfig: {tokenizersPoolConfig: {modelName: builtin}}}}]",
			`plugins[0] (precise-prefix-cache-scorer): needs hermod-indexer: start the picker with --indexer-address`},
		{"gated unavailable type with its gate", "featureGates: [prepareDataPlugins]\nplugins: [{type: test-gated-unavailable}]",
			`plugins[0] (test-gated-unavailable): plugin type test-gated-unavailable is not available in this build`},
		{"referenced twice", "plugins: [{type: queue-scorer}]\nschedulingProfiles: [{name: a, plugins: [{pluginRef: queue-scorer}, {pluginRef: queue-scorer}]}]",
			`schedulingProfiles[0].plugins[1].pluginRef: "queue-scorer" is referenced twice in profile "a"`},
		{"duplicate profile", "plugins: [{type: queue-scorer}, {type: single-profile-handler}]\nschedulingProfiles: [{name: a, plugins: []}, {name: a, plugins: []}]",
			`schedulingProfiles[1].name: profile "a" is defined twice`},
		{"two handlers", "plugins: [{type: single-profile-handler}, {type: pd-profile-handler}]\nschedulingProfiles: [{name: decode}, {name: prefill}]",
			`plugins: exactly one profile handler may be declared, found 2: plugins[0] (single-profile-handler), plugins[1] (pd-profile-handler)`},
		{"profiles without handler", "plugins: [{type: queue-scorer}]\nschedulingProfiles: [{name: a}, {name: b}]",
			`schedulingProfiles: 2 profiles need a profile handler`},
		{"single handler with two profiles", "plugins: [{type: single-profile-handler}]\nschedulingProfiles: [{name: a}, {name: b}]",
			`plugins[0] (single-profile-handler): single-profile-handler runs exactly one profile, but 2 are configured (a, b)`},
		{"data source not declared", "featureGates: [dataLayer]\nplugins: [{type: queue-scorer}]\ndata: {sources: [{pluginRef: models}]}",
			`data.sources[0].pluginRef: no plugin named "models" is declared in plugins`},
		{"data source of the wrong kind", "featureGates: [dataLayer]\nplugins: [{type: queue-scorer}]\ndata: {sources: [{pluginRef: queue-scorer}]}",
			`data.sources[0].pluginRef: "queue-scorer" (type queue-scorer) is not a data source`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := build(c.yaml)
			if err == nil {
				t.Fatal("built without error")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error:\n  %s\nwant it to contain:\n  %s", err, c.want)
			}
		})
	}
}

func TestBuildReportsEveryError(t *testing.T) {
	_, err := build("featureGates: [x]\nplugins: [{type: nope}, {type: load-aware-scorer, parameters: {threshold: a}}]")
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"featureGates[0]", "plugins[0] (nope)", "plugins[1] (load-aware-scorer)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q missing from %v", want, err)
		}
	}
}

func TestBuildWarnings(t *testing.T) {
	s, err := build(`
plugins:
- type: tokenizer
  parameters: {modelName: m}
- type: queue-scorer
  parameters: {scale: 2}
- type: max-score-picker
schedulingProfiles:
- name: a
  plugins:
  - {pluginRef: queue-scorer}
  - {pluginRef: max-score-picker, weight: 2}
`)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(s.Describe().Warnings, "\n")
	for _, want := range []string{
		"plugins[0] (tokenizer): skipped: plugins of this type need featureGates: [prepareDataPlugins]",
		"plugins[1] (queue-scorer): parameters.scale: unknown parameter, ignored",
		`schedulingProfiles[0].plugins[1].weight: "max-score-picker" is not a scorer; its weight is ignored`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("warnings lack %q:\n%s", want, got)
		}
	}
	for _, p := range s.Describe().Plugins {
		if p.Type == "tokenizer" && p.Skipped == "" {
			t.Errorf("tokenizer not marked skipped: %+v", p)
		}
	}
}

func TestBuildGatedPluginRunsWithGate(t *testing.T) {
	s := schedulingtest.Scheduler(t, "featureGates: [prepareDataPlugins]\nplugins: [{type: test-failing-prepare}, {type: queue-scorer}]")
	found := false
	for _, p := range s.Plugins() {
		found = found || p.TypedName().Type == "test-failing-prepare"
	}
	if !found {
		t.Error("gated plugin not active with its gate")
	}
}

func TestBuildDefaultConfig(t *testing.T) {
	s, err := scheduling.New(scheduling.DefaultConfig(), scheduling.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	got := profileSummary(s.Describe().SchedulingProfiles[0])
	if want := "default: filters= scorers=queue-scorerx2,kv-cache-utilization-scorerx2,prefix-cache-scorerx3 picker=max-score-picker"; got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// A configuration that fails to build closes the plugins already built.
func TestBuildFailureClosesPlugins(t *testing.T) {
	if _, err := build("plugins: [{type: test-closer}, {type: load-aware-scorer, parameters: {threshold: x}}]"); err == nil {
		t.Fatal("built")
	}
	if n := closers.Last().closed.Load(); n != 1 {
		t.Errorf("closed %d times, want 1", n)
	}
	s, err := build("plugins: [{type: test-closer}, {type: queue-scorer}]")
	if err != nil {
		t.Fatal(err)
	}
	c := closers.Last()
	if c.closed.Load() != 0 {
		t.Fatal("closed while in use")
	}
	if err := s.Close(); err != nil || c.closed.Load() != 1 {
		t.Errorf("Close: %v, closed %d", err, c.closed.Load())
	}
}

// A plugin that is not a filter, scorer or picker may be listed in a
// profile, as upstream accepts: it changes nothing there, and says so.
func TestNonSchedulingPluginInAProfile(t *testing.T) {
	s, err := build("plugins: [{type: single-profile-handler}, {type: queue-scorer}]\nschedulingProfiles: [{name: a, plugins: [{pluginRef: single-profile-handler}, {pluginRef: queue-scorer}]}]")
	if err != nil {
		t.Fatal(err)
	}
	want := `schedulingProfiles[0].plugins[0].pluginRef: "single-profile-handler" (type single-profile-handler) is not a filter, scorer or picker: it runs as a declared plugin`
	if w := s.Describe().Warnings; len(w) != 1 || !strings.HasPrefix(w[0], want) {
		t.Errorf("warnings %q, want %q", w, want)
	}
}

// A plugin reading an endpoint attribute (AttributeConsumer) needs an
// extractor producing it (AttributeProducer) listed under a data source,
// in dataLayer or in the older data section.
func TestBuildRequiresAttributeProducers(t *testing.T) {
	const plugins = `
plugins:
- {type: multicluster-metrics-data-source, name: src}
- {type: multicluster-metrics-extractor, name: x}
- {type: multicluster-kv-cache-utilization-scorer, name: kv}
- type: max-score-picker
schedulingProfiles:
- name: default
  plugins: [{pluginRef: kv}, {pluginRef: max-score-picker}]
`
	for name, c := range map[string]struct{ section, want string }{
		"bound":         {"dataLayer:\n  sources: [{pluginRef: src, extractors: [{pluginRef: x}]}]\n", ""},
		"older section": {"data:\n  sources: [{pluginRef: src, extractors: [{pluginRef: x}]}]\n", ""},
		"unbound":       {"dataLayer:\n  sources: [{pluginRef: src}]\n", `plugins[2] (kv, type multicluster-kv-cache-utilization-scorer): reads the endpoint attribute "llm-d.ai/multicluster-kv-cache-utilization", which no data extractor listed in dataLayer.sources produces`},
		"older unbound": {"data:\n  sources: [{pluginRef: src}]\n", "listed in data.sources"},
		"no section":    {"", "listed in dataLayer.sources"},
	} {
		s, err := build(plugins + c.section)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
		if s != nil {
			_ = s.Close()
		}
	}
}
