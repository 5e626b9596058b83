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
	if cfg.APIVersion != APIVersionGIE || cfg.Kind != ConfigKind {
		t.Errorf("omitted apiVersion/kind: got %q %q, want the GIE defaults", cfg.APIVersion, cfg.Kind)
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
	if got := strings.Join(cfg.FeatureGates, ","); got != "prepareDataPlugins,dataLayer" {
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

func TestParseConfigAcceptsOtherSections(t *testing.T) {
	cfg, err := ParseConfig([]byte(`
plugins: [{type: queue-scorer}]
saturationDetector: {queueDepthThreshold: 5, kvCacheUtilThreshold: 0.8, metricsStalenessThreshold: 200ms}
flowControl: {maxBytes: 1000}
parser: {pluginRef: openai-parser}
requestControl: {prepareDataTimeout: 1s}
`))
	if err != nil {
		t.Fatal(err)
	}
	if string(cfg.SaturationDetector) != `{"queueDepthThreshold":5,"kvCacheUtilThreshold":0.8,"metricsStalenessThreshold":"200ms"}` {
		t.Errorf("saturationDetector = %s", cfg.SaturationDetector)
	}
	if cfg.FlowControl == nil || cfg.Parser == nil || cfg.RequestControl == nil {
		t.Errorf("sections lost: %+v", cfg)
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
