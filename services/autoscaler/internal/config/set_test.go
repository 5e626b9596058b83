package config

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func mustSet(t *testing.T, docs ...string) *Set {
	t.Helper()
	s, err := NewSet(mustParse(t, []byte(strings.Join(docs, "---\n")))...)
	if err != nil {
		t.Fatalf("NewSet: %v", err)
	}
	return s
}

func referenceSet(t *testing.T) *Set {
	t.Helper()
	return mustSet(t,
		string(readTestdata(t, "variants.yaml")),
		string(readTestdata(t, "saturation-config.yaml")),
		string(readTestdata(t, "queueing-config.yaml")),
		string(readTestdata(t, "scale-to-zero-config.yaml")))
}

func TestSaturationResolution(t *testing.T) {
	const layered = `apiVersion: v1
kind: ConfigMap
metadata:
  name: wva-saturation-scaling-config
data:
  default: |
    kvCacheThreshold: 0.75
    scaleUpThreshold: 0.85
    acceleratorBudgets: {A100: 16, H100: 8}
  model: |
    model_id: m
    scaleUpThreshold: 0.95
    priority: 2
  model-in-prod: |
    model_id: m
    namespace: prod
    scaleDownBoundary: 0.5
    enableLimiter: true
  other-in-prod: |
    model_id: other
    namespace: prod
    analyzerName: saturation
`
	s := mustSet(t, layered)
	def := DefaultSaturationConfig()
	budgets := map[string]int{"A100": 16, "H100": 8}
	with := func(f func(c *SaturationConfig)) SaturationConfig {
		c := def
		c.KVCacheThreshold = 0.75
		c.AcceleratorBudgets = budgets
		f(&c)
		return c
	}
	tests := []struct {
		name, model, namespace string
		want                   SaturationConfig
	}{
		{"unknown model gets default entry", "x", "prod", with(func(*SaturationConfig) {})},
		{"model-only override in any namespace", "m", "dev", with(func(c *SaturationConfig) {
			c.ScaleUpThreshold, c.Priority = 0.95, 2
		})},
		{"model-only override without namespace", "m", "", with(func(c *SaturationConfig) {
			c.ScaleUpThreshold, c.Priority = 0.95, 2
		})},
		{"namespaced override layers on model-only one", "m", "prod", with(func(c *SaturationConfig) {
			c.ScaleUpThreshold, c.Priority, c.ScaleDownBoundary, c.EnableLimiter = 0.95, 2, 0.5, true
		})},
		{"namespaced override needs its namespace", "other", "dev", with(func(*SaturationConfig) {})},
		{"namespaced override matches", "other", "prod", with(func(c *SaturationConfig) { c.AnalyzerName = "saturation" })},
		{"namespaced override needs a namespace", "other", "", with(func(*SaturationConfig) {})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.Saturation(tt.model, tt.namespace)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v\nwant %+v", got, tt.want)
			}
		})
	}
	// The result is a copy.
	c, _ := s.Saturation("x", "")
	c.AcceleratorBudgets["A100"] = 0
	if c2, _ := s.Saturation("x", ""); c2.AcceleratorBudgets["A100"] != 16 {
		t.Error("AcceleratorBudgets aliases the ConfigMap")
	}
}

func TestSaturationReference(t *testing.T) {
	s := referenceSet(t)
	c, err := s.Saturation("meta/llama-3.1-8b", "llm-inference")
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultSaturationConfig()
	want.AnalyzerName = "saturation"
	want.ScaleUpThreshold, want.ScaleDownBoundary = 0.90, 0.75
	if !reflect.DeepEqual(c, want) {
		t.Errorf("got %+v\nwant %+v", c, want)
	}
	// In another namespace only the default entry applies; it keeps the
	// override's untouched keys (analyzerName) too.
	c, _ = s.Saturation("meta/llama-3.1-8b", "default")
	want.ScaleUpThreshold, want.ScaleDownBoundary = 0.85, 0.70
	if !reflect.DeepEqual(c, want) {
		t.Errorf("got %+v\nwant %+v", c, want)
	}
}

func TestSaturationDefaults(t *testing.T) {
	want := SaturationConfig{
		KVCacheThreshold: 0.80, QueueLengthThreshold: 5, KVSpareTrigger: 0.10, QueueSpareTrigger: 3,
		ScaleUpThreshold: 0.85, ScaleDownBoundary: 0.70, Priority: 1.0,
	}
	var nilSet *Set
	empty := mustSet(t)
	emptyMap := mustSet(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: wva-saturation-scaling-config}\n")
	for name, s := range map[string]*Set{"nil": nilSet, "empty": empty, "map without data": emptyMap} {
		got, err := s.Saturation("m", "ns")
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got %+v, %v", name, got, err)
		}
		if a, err := s.Analyzer("m", "ns"); err != nil || a != AnalyzerSaturationPercentage {
			t.Errorf("%s: analyzer %q, %v", name, a, err)
		}
		if q, active := s.Queueing("m", "ns"); active || q != (QueueingConfig{SLOMultiplier: 3, TuningEnabled: true}) {
			t.Errorf("%s: queueing %+v active %v", name, q, active)
		}
	}
}

func TestSaturationResolveInvalid(t *testing.T) {
	m := &SaturationConfigMap{
		Metadata: ObjectMeta{Name: SaturationConfigMapName},
		Entries:  map[string]SaturationEntry{"default": {ScaleDownBoundary: ptr(0.9)}},
	}
	_, err := m.Resolve("m", "ns")
	want := `resolve saturation config: wva-saturation-scaling-config (model_id "m", namespace "ns"): ` +
		`scaleDownBoundary: must be below scaleUpThreshold (0.85), got 0.9`
	if err == nil || err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
	if _, err := NewSet(m); err == nil {
		t.Error("NewSet accepted an invalid ConfigMap")
	}
}

func TestQueueingResolution(t *testing.T) {
	s := referenceSet(t)
	q, active := s.Queueing("meta/llama-3.1-8b", "llm-inference")
	if !active || q != (QueueingConfig{SLOMultiplier: 3, TuningEnabled: true, TargetTTFT: 500, TargetITL: 100}) {
		t.Errorf("got %+v active %v", q, active)
	}
	q, active = s.Queueing("meta/llama-3.1-8b", "other")
	if !active || q != (QueueingConfig{SLOMultiplier: 3, TuningEnabled: true}) {
		t.Errorf("got %+v active %v", q, active)
	}

	// Without a default entry the SLO analyzer is inactive; overrides
	// still resolve.
	s = mustSet(t, `apiVersion: v1
kind: ConfigMap
metadata: {name: wva-queueing-model-config}
data:
  slo: |
    model_id: m
    sloMultiplier: 4
    tuningEnabled: false
`)
	q, active = s.Queueing("m", "")
	if active || q != (QueueingConfig{SLOMultiplier: 4}) {
		t.Errorf("got %+v active %v", q, active)
	}
}

func TestAnalyzerSelection(t *testing.T) {
	satDefault := func(analyzer string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: wva-saturation-scaling-config}\n" +
			"data:\n  default: |\n    analyzerName: \"" + analyzer + "\"\n" +
			"  tok: |\n    model_id: tok\n    analyzerName: saturation\n"
	}
	const queueingDefault = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: wva-queueing-model-config}\ndata:\n  default: \"\"\n"
	const queueingOverrideOnly = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: wva-queueing-model-config}\n" +
		"data:\n  o: |\n    model_id: m\n"
	tests := []struct {
		name  string
		docs  []string
		model string
		want  Analyzer
	}{
		{"no config", nil, "m", AnalyzerSaturationPercentage},
		{"empty analyzerName", []string{satDefault("")}, "m", AnalyzerSaturationPercentage},
		{"token based", []string{satDefault("saturation")}, "m", AnalyzerSaturationToken},
		{"token based per model", []string{satDefault("")}, "tok", AnalyzerSaturationToken},
		{"queueing default entry wins", []string{satDefault("saturation"), queueingDefault}, "m", AnalyzerQueueingModel},
		{"queueing default entry wins over override", []string{satDefault(""), queueingDefault}, "tok", AnalyzerQueueingModel},
		{"queueing map without default entry", []string{satDefault("saturation"), queueingOverrideOnly}, "m", AnalyzerSaturationToken},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustSet(t, tt.docs...)
			got, err := s.Analyzer(tt.model, "ns")
			if err != nil || got != tt.want {
				t.Errorf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestScaleToZero(t *testing.T) {
	cm := func(entries string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: wva-model-scale-to-zero-config}\ndata:\n" + entries
	}
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == EnvScaleToZero {
				return v
			}
			return ""
		}
	}
	tests := []struct {
		name      string
		docs      []string
		model, ns string
		env       string
		want      ScaleToZeroConfig
		envErr    string
	}{
		{name: "nothing configured", want: ScaleToZeroConfig{RetentionPeriod: 10 * time.Minute, Source: SourceBuiltin}},
		{name: "env true", env: "true",
			want: ScaleToZeroConfig{Enabled: true, RetentionPeriod: 10 * time.Minute, Source: SourceEnv}},
		{name: "env 1", env: "1",
			want: ScaleToZeroConfig{Enabled: true, RetentionPeriod: 10 * time.Minute, Source: SourceEnv}},
		{name: "env false", env: "false",
			want: ScaleToZeroConfig{RetentionPeriod: 10 * time.Minute, Source: SourceEnv}},
		{name: "env invalid", env: "yes",
			want:   ScaleToZeroConfig{RetentionPeriod: 10 * time.Minute, Source: SourceBuiltin},
			envErr: `WVA_SCALE_TO_ZERO="yes" is not a boolean, scale to zero stays disabled: strconv.ParseBool: parsing "yes": invalid syntax`},
		{name: "default entry beats env", docs: []string{cm("  default: |\n    enable_scale_to_zero: false\n")}, env: "true",
			want: ScaleToZeroConfig{RetentionPeriod: 10 * time.Minute, Source: SourceDefault}},
		{name: "default entry without enable defers to env (tri-state)",
			docs: []string{cm("  default: |\n    retention_period: 5m\n")}, env: "true",
			want: ScaleToZeroConfig{Enabled: true, RetentionPeriod: 5 * time.Minute, Source: SourceEnv}},
		{name: "default entry true", docs: []string{cm("  default: |\n    enable_scale_to_zero: true\n")},
			want: ScaleToZeroConfig{Enabled: true, RetentionPeriod: 10 * time.Minute, Source: SourceDefault}},
		{name: "override beats default", model: "m",
			docs: []string{cm("  default: |\n    enable_scale_to_zero: true\n    retention_period: 30m\n" +
				"  o: |\n    model_id: m\n    enable_scale_to_zero: false\n")},
			want: ScaleToZeroConfig{RetentionPeriod: 30 * time.Minute, Source: SourceOverride}},
		{name: "override without enable inherits default", model: "m",
			docs: []string{cm("  default: |\n    enable_scale_to_zero: true\n" +
				"  o: |\n    model_id: m\n    retention_period: 1h\n")},
			want: ScaleToZeroConfig{Enabled: true, RetentionPeriod: time.Hour, Source: SourceDefault}},
		{name: "override without enable and no default defers to env", model: "m", env: "true",
			docs: []string{cm("  o: |\n    model_id: m\n    retention_period: 2m\n")},
			want: ScaleToZeroConfig{Enabled: true, RetentionPeriod: 2 * time.Minute, Source: SourceEnv}},
		{name: "override beats env", model: "m", env: "false",
			docs: []string{cm("  o: |\n    model_id: m\n    enable_scale_to_zero: true\n")},
			want: ScaleToZeroConfig{Enabled: true, RetentionPeriod: 10 * time.Minute, Source: SourceOverride}},
		{name: "override beats invalid env without reporting it", model: "m", env: "maybe",
			docs: []string{cm("  o: |\n    model_id: m\n    enable_scale_to_zero: true\n")},
			want: ScaleToZeroConfig{Enabled: true, RetentionPeriod: 10 * time.Minute, Source: SourceOverride}},
		{name: "namespaced override matches its namespace", model: "m", ns: "prod",
			docs: []string{cm("  default: |\n    enable_scale_to_zero: true\n" +
				"  o: |\n    model_id: m\n    namespace: prod\n    enable_scale_to_zero: false\n")},
			want: ScaleToZeroConfig{RetentionPeriod: 10 * time.Minute, Source: SourceOverride}},
		{name: "namespaced override ignores other namespaces", model: "m", ns: "dev",
			docs: []string{cm("  default: |\n    enable_scale_to_zero: true\n" +
				"  o: |\n    model_id: m\n    namespace: prod\n    enable_scale_to_zero: false\n")},
			want: ScaleToZeroConfig{Enabled: true, RetentionPeriod: 10 * time.Minute, Source: SourceDefault}},
		{name: "namespaced beats model-only", model: "m", ns: "prod",
			docs: []string{cm("  a: |\n    model_id: m\n    enable_scale_to_zero: false\n    retention_period: 3m\n" +
				"  b: |\n    model_id: m\n    namespace: prod\n    enable_scale_to_zero: true\n")},
			want: ScaleToZeroConfig{Enabled: true, RetentionPeriod: 3 * time.Minute, Source: SourceOverride}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustSet(t, tt.docs...)
			model := tt.model
			if model == "" {
				model = "any"
			}
			got := s.ScaleToZero(model, tt.ns, env(tt.env))
			gotErr := ""
			if got.EnvErr != nil {
				gotErr = got.EnvErr.Error()
			}
			got.EnvErr = nil
			if got != tt.want || gotErr != tt.envErr {
				t.Errorf("got %+v %q\nwant %+v %q", got, gotErr, tt.want, tt.envErr)
			}
		})
	}
}

func TestScaleToZeroReference(t *testing.T) {
	s := referenceSet(t)
	noEnv := func(string) string { return "" }
	if c := s.ScaleToZero("meta/llama-3.1-8b", "llm-inference", noEnv); c.Enabled || c.Source != SourceOverride ||
		c.RetentionPeriod != 10*time.Minute {
		t.Errorf("llama: %+v", c)
	}
	if c := s.ScaleToZero("other", "llm-inference", noEnv); !c.Enabled || c.Source != SourceDefault {
		t.Errorf("other: %+v", c)
	}
}

func TestScaleToZeroOSEnv(t *testing.T) {
	t.Setenv(EnvScaleToZero, "true")
	var s *Set
	if c := s.ScaleToZero("m", "", nil); !c.Enabled || c.Source != SourceEnv {
		t.Errorf("got %+v", c)
	}
}

func TestGroups(t *testing.T) {
	va := func(name, ns, model string) string {
		return "apiVersion: llmd.ai/v1alpha1\nkind: VariantAutoscaling\nmetadata:\n  name: " + name +
			"\n  namespace: " + ns + "\nspec:\n  scaleTargetRef: {kind: Deployment, name: " + name +
			"}\n  modelID: " + model + "\n"
	}
	s := mustSet(t,
		va("z", "prod", "b"), va("a", "prod", "b"), va("m", "dev", "b"),
		va("x", "prod", "a"), va("a", "dev", "a"))
	type g struct {
		model, ns string
		names     []string
	}
	var got []g
	for _, grp := range s.Groups() {
		var names []string
		for _, v := range grp.Variants {
			names = append(names, v.Metadata.Name)
		}
		got = append(got, g{grp.ModelID, grp.Namespace, names})
	}
	want := []g{
		{"a", "dev", []string{"a"}},
		{"a", "prod", []string{"x"}},
		{"b", "dev", []string{"m"}},
		{"b", "prod", []string{"a", "z"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	if v, ok := s.Variant("dev", "a"); !ok || v.Spec.ModelID != "a" {
		t.Errorf("Variant(dev, a) = %v, %v", v, ok)
	}
	if _, ok := s.Variant("", "a"); ok {
		t.Error("Variant found in the wrong namespace")
	}
	if n := len(s.Variants()); n != 5 {
		t.Errorf("%d variants", n)
	}

	ref := referenceSet(t).Groups()
	if len(ref) != 1 || ref[0].ModelID != "meta/llama-3.1-8b" || len(ref[0].Variants) != 2 ||
		ref[0].Variants[0].Metadata.Name != "llama-8b-a100" || ref[0].Variants[1].Metadata.Name != "llama-8b-a10g" {
		t.Errorf("reference groups %+v", ref)
	}
}

func TestNewSetErrors(t *testing.T) {
	objs := mustParse(t, []byte(validVA+"---\n"+validVA+"---\n"+validSaturation+"---\n"+validSaturation))
	_, err := NewSet(objs...)
	want := []string{
		`VariantAutoscaling "llama-8b-a10g": metadata.name: defined more than once`,
		`wva-saturation-scaling-config: metadata.name: defined more than once`,
	}
	if got := errLines(err); !reflect.DeepEqual(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}
	var fe *FieldError
	if !errors.As(err, &fe) {
		t.Errorf("%v is not a FieldError", err)
	}
	if _, err := NewSet(nil); err == nil {
		t.Error("NewSet(nil) succeeded")
	}
	// Same name in two namespaces is fine.
	other := strings.Replace(validVA, "  name: llama-8b-a10g\n", "  name: llama-8b-a10g\n  namespace: other\n", 1)
	if _, err := NewSet(mustParse(t, []byte(validVA+"---\n"+other))...); err != nil {
		t.Error(err)
	}
}

func TestObjects(t *testing.T) {
	s := referenceSet(t)
	var got []string
	for _, o := range s.Objects() {
		got = append(got, o.ObjectKind()+"/"+o.ObjectName())
	}
	want := []string{
		"VariantAutoscaling/llama-8b-a100", "VariantAutoscaling/llama-8b-a10g",
		"ConfigMap/wva-saturation-scaling-config", "ConfigMap/wva-queueing-model-config",
		"ConfigMap/wva-model-scale-to-zero-config",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %q", got)
	}
}

func TestMarshalRoundTrip(t *testing.T) {
	full := `apiVersion: llmd.ai/v1alpha1
kind: VariantAutoscaling
metadata:
  name: v
  namespace: prod
  labels:
    inference.optimization/acceleratorName: A100
    hermod.io/gpus-per-replica: "2"
  annotations:
    note: "yes"
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: v}
  modelID: "1.10"
  minReplicas: 0
  maxReplicas: 3
  variantCost: "10.0"
status:
  desiredOptimizedAlloc: {numReplicas: 0, lastRunTime: "2025-06-01T12:00:00.5+02:00"}
  actuation: {applied: false}
  conditions:
  - {type: OptimizationReady, status: "True", lastTransitionTime: "2025-06-01T12:00:00Z"}
`
	inputs := map[string][]byte{
		"variants":      readTestdata(t, "variants.yaml"),
		"saturation":    readTestdata(t, "saturation-config.yaml"),
		"queueing":      readTestdata(t, "queueing-config.yaml"),
		"scale-to-zero": readTestdata(t, "scale-to-zero-config.yaml"),
		"full":          []byte(full),
		"minimal":       []byte("apiVersion: llmd.ai/v1alpha1\nkind: VariantAutoscaling\nmetadata: {name: v}\nspec: {scaleTargetRef: {kind: K, name: tgt}, modelID: m}\n"),
	}
	for name, in := range inputs {
		t.Run(name, func(t *testing.T) {
			for _, obj := range mustParse(t, in) {
				out, err := Marshal(obj)
				if err != nil {
					t.Fatal(err)
				}
				back := mustParse(t, out)
				if len(back) != 1 {
					t.Fatalf("%d objects from\n%s", len(back), out)
				}
				out2, err := Marshal(back[0])
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(out, out2) {
					t.Errorf("not stable:\n%s\n---\n%s", out, out2)
				}
				if _, isVA := obj.(*VariantAutoscaling); isVA && name != "full" && !reflect.DeepEqual(back[0], obj) {
					t.Errorf("round trip changed the object:\n%#v\n%#v", obj, back[0])
				}
				if va, isVA := back[0].(*VariantAutoscaling); isVA && name == "full" {
					if va.Spec.ModelID != "1.10" || va.Metadata.Annotations["note"] != "yes" ||
						!va.Status.DesiredOptimizedAlloc.LastRunTime.Equal(time.Date(2025, 6, 1, 10, 0, 0, 5e8, time.UTC)) {
						t.Errorf("round trip changed values:\n%s", out)
					}
				}
				if _, isVA := obj.(*VariantAutoscaling); !isVA && !reflect.DeepEqual(back[0], obj) {
					t.Errorf("round trip changed the ConfigMap:\n%#v\n%#v", obj, back[0])
				}
			}
		})
	}
}

func TestMarshalMinimal(t *testing.T) {
	out, err := Marshal(mustParse(t, readTestdata(t, "variants.yaml"))[0])
	if err != nil {
		t.Fatal(err)
	}
	want := `apiVersion: llmd.ai/v1alpha1
kind: VariantAutoscaling
metadata:
  name: llama-8b-a10g
spec:
  maxReplicas: 10
  minReplicas: 1
  modelID: meta/llama-3.1-8b
  scaleTargetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: llama-8b-a10g
  variantCost: "5.0"
`
	if string(out) != want {
		t.Errorf("got\n%s\nwant\n%s", out, want)
	}
	if _, err := Marshal((*VariantAutoscaling)(nil)); err == nil {
		t.Error("Marshal(nil) succeeded")
	}
}
