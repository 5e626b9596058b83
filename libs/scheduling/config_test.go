package scheduling

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

const minimal = `
apiVersion: inference.networking.x-k8s.io/v1alpha1
kind: EndpointPickerConfig
plugins:
- type: queue-scorer
`

func TestParseConfigAPIVersions(t *testing.T) {
	for _, v := range []string{APIVersionGIE, APIVersionLLMD} {
		cfg, err := ParseConfig([]byte("apiVersion: " + v + "\nkind: EndpointPickerConfig\nplugins: [{type: queue-scorer}]\n"))
		if err != nil {
			t.Fatalf("%s: %v", v, err)
		}
		if cfg.APIVersion != v || cfg.Kind != ConfigKind {
			t.Errorf("%s: got %q %q", v, cfg.APIVersion, cfg.Kind)
		}
	}
	cfg, err := ParseConfig([]byte("plugins: [{type: queue-scorer}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.APIVersion != APIVersionLLMD || cfg.Kind != ConfigKind || len(cfg.Deprecations) != 0 {
		t.Errorf("omitted apiVersion/kind: got %q %q (%q), want the llm-d.ai defaults and no deprecation", cfg.APIVersion, cfg.Kind, cfg.Deprecations)
	}
}

func TestParseConfigPluginsAndProfiles(t *testing.T) {
	cfg, err := ParseConfig([]byte(`
apiVersion: llm-d.ai/v1alpha1
kind: EndpointPickerConfig
featureGates: [prepareDataPlugins, dataLayer]
plugins:
- type: queue-scorer
  name: q
  parameters:
    a: 1
    b: [x, "y", 2.5, true, null]
    c: {d: 0x10, e: 1_000}
- type: max-score-picker
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: q
    weight: 2.5
  - pluginRef: max-score-picker
dataLayer:
  sources:
  - pluginRef: models-data-source
    extractors:
    - pluginRef: model-server-protocol-models
`))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(gateStrings(cfg.FeatureGates), ","); got != "prepareDataPlugins" || !strings.Contains(strings.Join(cfg.Deprecations, "\n"), "dataLayer changes nothing") {
		t.Errorf("featureGates = %s", got)
	}
	if len(cfg.Plugins) != 2 || cfg.Plugins[0].Name != "q" || cfg.Plugins[1].Name != "max-score-picker" {
		t.Fatalf("plugins = %+v", cfg.Plugins)
	}
	var params map[string]any
	if err := json.Unmarshal(cfg.Plugins[0].Parameters, &params); err != nil {
		t.Fatalf("parameters are not JSON: %v (%s)", err, cfg.Plugins[0].Parameters)
	}
	if want := `{"a":1,"b":["x","y",2.5,true,null],"c":{"d":16,"e":1000}}`; string(cfg.Plugins[0].Parameters) != want {
		t.Errorf("parameters JSON = %s, want %s", cfg.Plugins[0].Parameters, want)
	}
	if cfg.Plugins[1].Parameters != nil {
		t.Errorf("absent parameters should be nil, got %s", cfg.Plugins[1].Parameters)
	}
	p := cfg.SchedulingProfiles[0]
	if p.Name != "default" || len(p.Plugins) != 2 || *p.Plugins[0].Weight != 2.5 || p.Plugins[1].Weight != nil {
		t.Errorf("profile = %+v", p)
	}
	if cfg.Data == nil || len(cfg.Data.Sources) != 1 || cfg.Data.Sources[0].PluginRef != "models-data-source" ||
		strings.Join(cfg.Data.Sources[0].Extractors, ",") != "model-server-protocol-models" {
		t.Errorf("data = %+v", cfg.Data)
	}
}

func TestParseConfigHelmValues(t *testing.T) {
	asMapping := `
global:
  imagePullSecrets: [{name: moreh-registry}]
config:
  apiVersion: inference.networking.x-k8s.io/v1alpha1
  kind: EndpointPickerConfig
  plugins:
  - type: queue-scorer
gateway:
  name: mif
`
	asString := `
extraArgs: ["-v=4"]
config: |
  apiVersion: inference.networking.x-k8s.io/v1alpha1
  kind: EndpointPickerConfig
  plugins:
  - type: queue-scorer
`
	for name, doc := range map[string]string{"mapping": asMapping, "string": asString} {
		cfg, err := ParseConfig([]byte(doc))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !cfg.FromValuesFile || len(cfg.Plugins) != 1 || cfg.Plugins[0].Type != "queue-scorer" {
			t.Errorf("%s: %+v", name, cfg)
		}
	}
	// A values file whose config is not an EndpointPickerConfig fails on it.
	_, err := ParseConfig([]byte("config:\n  plugins: [{type: x}]\n  bogus: 1\n"))
	if err == nil || !strings.Contains(err.Error(), "bogus: unknown field at the top level") {
		t.Errorf("bad values config: %v", err)
	}
}

// The deprecated top-level sections move to the v0.9+ layout: parser to
// requestHandler.parsers, saturationDetector to flowControl (GIE's inline
// thresholds become a utilization-detector), each with a deprecation.
func TestParseConfigMovesDeprecatedSections(t *testing.T) {
	cfg, err := ParseConfig([]byte(`
apiVersion: inference.networking.x-k8s.io/v1alpha1
plugins: [{type: queue-scorer}, {type: utilization-detector, name: saturation-detector}]
saturationDetector: {queueDepthThreshold: 5, kvCacheUtilThreshold: 0.8, metricsStalenessThreshold: 200ms}
flowControl: {maxBytes: 1000}
parser: {pluginRef: openai-parser}
requestControl: {prepareDataTimeout: 1s}
`))
	if err != nil {
		t.Fatal(err)
	}
	last := cfg.Plugins[len(cfg.Plugins)-1]
	if last.Type != TypeUtilizationDetector || last.Name != "saturation-detector-2" ||
		string(last.Parameters) != `{"queueDepthThreshold":5,"kvCacheUtilThreshold":0.8,"metricsStalenessThreshold":"200ms"}` {
		t.Errorf("GIE's thresholds gave %+v", last)
	}
	if cfg.FlowControl == nil || cfg.FlowControl.SaturationDetector != "saturation-detector-2" || cfg.FlowControl.MaxBytes.Value != 1000 {
		t.Errorf("flowControl = %+v", cfg.FlowControl)
	}
	if strings.Join(cfg.Parsers, ",") != "openai-parser" || cfg.RequestControl == nil {
		t.Errorf("parsers %v, requestControl %s", cfg.Parsers, cfg.RequestControl)
	}
	if len(cfg.Deprecations) != 3 {
		t.Errorf("deprecations: %q", cfg.Deprecations)
	}
	for _, want := range []string{"apiVersion: inference.networking.x-k8s.io/v1alpha1 is deprecated", "use requestHandler.parsers", "use flowControl.saturationDetector"} {
		if !strings.Contains(strings.Join(cfg.Deprecations, "\n"), want) {
			t.Errorf("no deprecation says %q: %q", want, cfg.Deprecations)
		}
	}
}

// The new field wins over the deprecated one when both are set.
func TestParseConfigNewFieldsWin(t *testing.T) {
	cfg, err := ParseConfig([]byte(`
apiVersion: llm-d.ai/v1alpha1
kind: EndpointPickerConfig
featureGates: [flowControl=false, "haPopulateNonLeaderDatastore=TRUE", dataLayer]
plugins: [{type: queue-scorer}]
parser: {pluginRef: old-parser}
requestHandler:
  parsers: [{pluginRef: openai-parser}, {pluginRef: anthropic-parser}]
saturationDetector: {pluginRef: old-detector}
flowControl:
  saturationDetector: {pluginRef: new-detector}
  maxRequests: 10k
  defaultRequestTTL: 0s
  enableEviction: true
  defaultPriorityBand: {maxRequests: 5000, maxBytes: 1G}
  priorityBands:
  - {priority: 100, maxRequests: "2k", fairnessPolicyRef: round-robin-fairness-policy, orderingPolicyRef: fcfs-ordering-policy}
  - {priority: -10, maxBytes: 1Gi}
dataLayer:
  injectDefaults: false
  discovery: {pluginRef: file-discovery}
  sources: [{pluginRef: metrics-data-source, extractors: [{pluginRef: core-metrics-extractor}]}]
`))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(gateStrings(cfg.FeatureGates), ","); got != "flowControl=false,haPopulateNonLeaderDatastore" {
		t.Errorf("gates = %s", got)
	}
	if strings.Join(cfg.Parsers, ",") != "openai-parser,anthropic-parser" {
		t.Errorf("parsers = %v", cfg.Parsers)
	}
	f := cfg.FlowControl
	if f.SaturationDetector != "new-detector" || f.MaxRequests.Value != 10000 || *f.DefaultRequestTTL != 0 || !f.EnableEviction ||
		f.DefaultPriorityBand.MaxBytes.Value != 1e9 || len(f.PriorityBands) != 2 || f.PriorityBands[0].MaxRequests.Value != 2000 ||
		f.PriorityBands[1].Priority != -10 || f.PriorityBands[1].MaxBytes.Value != 1<<30 {
		t.Errorf("flowControl = %+v", f)
	}
	if d := cfg.Data; *d.InjectDefaults || d.Discovery != "file-discovery" || len(d.Sources) != 1 {
		t.Errorf("dataLayer = %+v", d)
	}
	if len(cfg.Deprecations) != 3 {
		t.Errorf("deprecations: %q", cfg.Deprecations)
	}
}

func TestParseConfigErrors(t *testing.T) {
	cases := []struct {
		name, doc string
		want      []string
	}{
		{"unknown top-level", "plugins: []\nbogus: 1\n", []string{"bogus: unknown field at the top level of EndpointPickerConfig (line 2)"}},
		{"bad apiVersion", "apiVersion: v1\nplugins: []\n", []string{`apiVersion: "v1" is not supported`}},
		{"bad kind", "kind: ConfigMap\nplugins: []\n", []string{`kind: "ConfigMap" is not supported`}},
		{"duplicate key", "plugins: []\nplugins: []\n", []string{"plugins: defined twice (line 2)"}},
		{"plugins not a list", "plugins: {type: x}\n", []string{"plugins: must be a list (line 1)"}},
		{"plugin not a mapping", "plugins: [queue-scorer]\n", []string{"plugins[0]: must be a mapping"}},
		{"plugin without type", "plugins: [{name: x}]\n", []string{"plugins[0]: type: required"}},
		{"type not a string", "plugins: [{type: 3}]\n", []string{"plugins[0].type: must be a string"}},
		{"unknown plugin field", "plugins: [{type: x, weight: 2}]\n", []string{"plugins[0].weight: unknown field"}},
		{"parameters not a mapping", "plugins: [{type: x, parameters: [1]}]\n", []string{"plugins[0].parameters: must be a mapping"}},
		{"profile without name", "schedulingProfiles: [{plugins: []}]\n", []string{"schedulingProfiles[0]: name: required"}},
		{"missing pluginRef", "schedulingProfiles: [{name: a, plugins: [{weight: 1}]}]\n", []string{"schedulingProfiles[0].plugins[0]: pluginRef: required"}},
		{"weight string", "schedulingProfiles: [{name: a, plugins: [{pluginRef: x, weight: high}]}]\n", []string{"schedulingProfiles[0].plugins[0].weight: must be a number"}},
		{"weight negative", "schedulingProfiles: [{name: a, plugins: [{pluginRef: x, weight: -1}]}]\n", []string{"weight: must not be negative"}},
		{"weight NaN", "schedulingProfiles: [{name: a, plugins: [{pluginRef: x, weight: .nan}]}]\n", []string{"weight: must be a finite number"}},
		{"featureGates not a list", "featureGates: prepareDataPlugins\n", []string{"featureGates: must be a list"}},
		{"data twice", "data: {}\ndataLayer: {}\n", []string{"data and dataLayer are the same section"}},
		{"data source without ref", "data: {sources: [{extractors: []}]}\n", []string{"data.sources[0]: pluginRef: required"}},
		{"float parameter infinity", "plugins: [{type: x, parameters: {a: .inf}}]\n", []string{"plugins[0].parameters.a: \".inf\" is not a finite number"}},
		{"several errors reported", "bogus: 1\nplugins: [{name: x}]\n", []string{"bogus: unknown field", "plugins[0]: type: required"}},
		{"empty", "", []string{"config is empty"}},
		{"comments only", "# nothing\n", []string{"config is empty"}},
		{"null", "null\n", []string{"config is empty"}},
		{"not a mapping", "- a\n- b\n", []string{"config: must be a mapping"}},
		{"two documents", "plugins: []\n---\nplugins: []\n", []string{"more than one YAML document"}},
		{"invalid yaml", "plugins: [\n", []string{"config is not valid YAML"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(c.doc))
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestParseConfigAliasesAndMerges(t *testing.T) {
	cfg, err := ParseConfig([]byte(`
plugins:
- type: a
  parameters: &base
    x: 1
    y: [1, 2]
- type: b
  parameters:
    <<: *base
    x: 2
    z: *base
`))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(cfg.Plugins[1].Parameters); got != `{"x":2,"z":{"x":1,"y":[1,2]},"y":[1,2]}` {
		t.Errorf("merged parameters = %s", got)
	}
}

func TestParseConfigAliasBomb(t *testing.T) {
	// Each level doubles the expansion: 2^30 leaves if expanded naively.
	var b strings.Builder
	b.WriteString("plugins:\n- type: x\n  parameters:\n    l0: &l0 [aaaaaaaaaaaaaaaa, aaaaaaaaaaaaaaaa]\n")
	for i := 1; i <= 30; i++ {
		b.WriteString("    l")
		b.WriteString(strconv.Itoa(i))
		b.WriteString(": &l")
		b.WriteString(strconv.Itoa(i))
		b.WriteString(" [*l")
		b.WriteString(strconv.Itoa(i - 1))
		b.WriteString(", *l")
		b.WriteString(strconv.Itoa(i - 1))
		b.WriteString("]\n")
	}
	_, err := ParseConfig([]byte(b.String()))
	if err == nil || !strings.Contains(err.Error(), "expands to more than") {
		t.Fatalf("alias bomb: %v", err)
	}
}

func TestParseConfigMergeBomb(t *testing.T) {
	// Merging an alias twice per level doubles the merged keys: 2^40 pairs
	// if resolved naively, before any output is written.
	var b strings.Builder
	b.WriteString("plugins:\n- type: x\n  parameters:\n    m0: &m0 {a: 1}\n")
	for i := 1; i <= 40; i++ {
		s, p := strconv.Itoa(i), strconv.Itoa(i-1)
		b.WriteString("    m" + s + ": &m" + s + " {<<: [*m" + p + ", *m" + p + "], k" + s + ": 1}\n")
	}
	_, err := ParseConfig([]byte(b.String()))
	if err == nil || !strings.Contains(err.Error(), "expands to more than") {
		t.Fatalf("merge bomb: %v", err)
	}
}

func TestDefaultConfigShape(t *testing.T) {
	cfg := DefaultConfig()
	var types []string
	for _, p := range cfg.Plugins {
		types = append(types, p.Type)
	}
	if got := strings.Join(types, ","); got != "queue-scorer,kv-cache-utilization-scorer,prefix-cache-scorer,max-score-picker" {
		t.Errorf("default plugins = %s", got)
	}
	w := cfg.SchedulingProfiles[0].Plugins
	if *w[0].Weight != 2 || *w[1].Weight != 2 || *w[2].Weight != 3 || w[3].Weight != nil {
		t.Errorf("default weights = %v %v %v", *w[0].Weight, *w[1].Weight, *w[2].Weight)
	}
}

func TestParseQuantity(t *testing.T) {
	for in, want := range map[string]int64{
		"0": 0, "1000": 1000, "10Gi": 10 << 30, "1k": 1000, "1.5M": 1500000, "1500m": 2, "1m": 1,
		"1e3": 1000, "2E-2": 1, "+5": 5, "0.5Ki": 512, "1G": 1e9, "8Ei": -1, "7Ei": 7 << 60, " 3 ": 3,
	} {
		q, err := ParseQuantity(in)
		switch {
		case want < 0 && err == nil:
			t.Errorf("%q: %d, want out of range", in, q.Value)
		case want >= 0 && (err != nil || q.Value != want):
			t.Errorf("%q: %d, %v; want %d", in, q.Value, err, want)
		}
	}
	for _, bad := range []string{"", "-1", "1Xi", "k", "1e", "1e99999", "1.2.3", "Gi", strings.Repeat("9", 80)} {
		if q, err := ParseQuantity(bad); err == nil {
			t.Errorf("%q parsed as %d", bad, q.Value)
		}
	}
}
