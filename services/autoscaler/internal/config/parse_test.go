package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func ptr[T any](v T) *T { return &v }

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustParse(t testing.TB, data []byte) []Object {
	t.Helper()
	objs, err := Parse(data)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return objs
}

// errLines returns the lines of an error ("" for nil).
func errLines(err error) []string {
	if err == nil {
		return nil
	}
	return strings.Split(err.Error(), "\n")
}

func TestParseReferenceVariants(t *testing.T) {
	objs := mustParse(t, readTestdata(t, "variants.yaml"))
	want := []Object{
		&VariantAutoscaling{
			APIVersion: "llmd.ai/v1alpha1",
			Kind:       "VariantAutoscaling",
			Metadata:   ObjectMeta{Name: "llama-8b-a10g"},
			Spec: VariantAutoscalingSpec{
				ScaleTargetRef: ScaleTargetRef{APIVersion: "apps/v1", Kind: "Deployment", Name: "llama-8b-a10g"},
				ModelID:        "meta/llama-3.1-8b",
				MinReplicas:    ptr[int32](1),
				MaxReplicas:    ptr[int32](10),
				VariantCost:    "5.0",
			},
		},
		&VariantAutoscaling{
			APIVersion: "llmd.ai/v1alpha1",
			Kind:       "VariantAutoscaling",
			Metadata:   ObjectMeta{Name: "llama-8b-a100"},
			Spec: VariantAutoscalingSpec{
				ScaleTargetRef: ScaleTargetRef{APIVersion: "apps/v1", Kind: "Deployment", Name: "llama-8b-a100"},
				ModelID:        "meta/llama-3.1-8b",
				MinReplicas:    ptr[int32](0),
				MaxReplicas:    ptr[int32](5),
				VariantCost:    "15.0",
			},
		},
	}
	if !reflect.DeepEqual(objs, want) {
		t.Fatalf("got %#v\nwant %#v", objs, want)
	}
	a10g, a100 := objs[0].(*VariantAutoscaling), objs[1].(*VariantAutoscaling)
	if a10g.Cost() != 5 || a100.Cost() != 15 {
		t.Errorf("costs %g %g, want 5 15", a10g.Cost(), a100.Cost())
	}
	if a10g.Min() != 1 || a10g.Max() != 10 || a100.Min() != 0 || a100.Max() != 5 {
		t.Errorf("bounds %d..%d %d..%d", a10g.Min(), a10g.Max(), a100.Min(), a100.Max())
	}
}

var wvaLabels = map[string]string{"app.kubernetes.io/name": "workload-variant-autoscaler"}

func TestParseReferenceSaturationConfig(t *testing.T) {
	objs := mustParse(t, readTestdata(t, "saturation-config.yaml"))
	want := []Object{&SaturationConfigMap{
		Metadata: ObjectMeta{Name: SaturationConfigMapName, Labels: wvaLabels},
		Entries: map[string]SaturationEntry{
			"default": {
				AnalyzerName:         ptr("saturation"),
				KVCacheThreshold:     ptr(0.80),
				QueueLengthThreshold: ptr(5.0),
				KVSpareTrigger:       ptr(0.10),
				QueueSpareTrigger:    ptr(3.0),
				ScaleUpThreshold:     ptr(0.85),
				ScaleDownBoundary:    ptr(0.70),
				EnableLimiter:        ptr(false),
				Priority:             ptr(1.0),
			},
			"llama-override": {
				ModelID:           "meta/llama-3.1-8b",
				Namespace:         "llm-inference",
				ScaleUpThreshold:  ptr(0.90),
				ScaleDownBoundary: ptr(0.75),
			},
		},
	}}
	if !reflect.DeepEqual(objs, want) {
		t.Fatalf("got %#v\nwant %#v", objs[0], want[0])
	}
}

func TestParseReferenceQueueingConfig(t *testing.T) {
	objs := mustParse(t, readTestdata(t, "queueing-config.yaml"))
	want := []Object{&QueueingConfigMap{
		Metadata: ObjectMeta{Name: QueueingConfigMapName, Labels: wvaLabels},
		Entries: map[string]QueueingEntry{
			"default": {SLOMultiplier: ptr(3.0), TuningEnabled: ptr(true)},
			"llama-slo": {
				ModelID:    "meta/llama-3.1-8b",
				Namespace:  "llm-inference",
				TargetTTFT: ptr(500.0),
				TargetITL:  ptr(100.0),
			},
		},
	}}
	if !reflect.DeepEqual(objs, want) {
		t.Fatalf("got %#v\nwant %#v", objs[0], want[0])
	}
}

func TestParseReferenceScaleToZeroConfig(t *testing.T) {
	objs := mustParse(t, readTestdata(t, "scale-to-zero-config.yaml"))
	want := []Object{&ScaleToZeroConfigMap{
		Metadata: ObjectMeta{Name: ScaleToZeroConfigMapName, Labels: wvaLabels},
		Entries: map[string]ScaleToZeroEntry{
			"default":        {EnableScaleToZero: ptr(true), RetentionPeriod: ptr("10m")},
			"llama-override": {ModelID: "meta/llama-3.1-8b", EnableScaleToZero: ptr(false)},
		},
	}}
	if !reflect.DeepEqual(objs, want) {
		t.Fatalf("got %#v\nwant %#v", objs[0], want[0])
	}
}

// All reference examples form one consistent stream.
func TestParseReferenceStream(t *testing.T) {
	var stream []string
	for _, f := range []string{"variants.yaml", "saturation-config.yaml", "queueing-config.yaml", "scale-to-zero-config.yaml"} {
		stream = append(stream, string(readTestdata(t, f)))
	}
	objs := mustParse(t, []byte(strings.Join(stream, "---\n")))
	if len(objs) != 5 {
		t.Fatalf("got %d objects, want 5", len(objs))
	}
	if _, err := NewSet(objs...); err != nil {
		t.Fatal(err)
	}
}

func TestVariantDefaults(t *testing.T) {
	objs := mustParse(t, []byte(`
apiVersion: llmd.ai/v1alpha1
kind: VariantAutoscaling
metadata:
  name: v
spec:
  scaleTargetRef: {kind: Deployment, name: v}
  modelID: m
`))
	v := objs[0].(*VariantAutoscaling)
	if v.Min() != 1 || v.Max() != 2 || v.Cost() != 10 {
		t.Errorf("Min %d Max %d Cost %g, want 1 2 10", v.Min(), v.Max(), v.Cost())
	}
	if v.Accelerator() != "" || v.GPUsPerReplica() != 1 || v.MaxNumBatchedTokens() != 8192 || v.MaxNumSeqs() != 256 {
		t.Errorf("labels: %q %d %d %d", v.Accelerator(), v.GPUsPerReplica(), v.MaxNumBatchedTokens(), v.MaxNumSeqs())
	}
	if v.Spec.MinReplicas != nil || v.Spec.MaxReplicas != nil || v.Spec.VariantCost != "" {
		t.Errorf("unset fields were filled: %+v", v.Spec)
	}
	v.SetDefaults()
	if *v.Spec.MinReplicas != 1 || *v.Spec.MaxReplicas != 2 || v.Spec.VariantCost != "10.0" {
		t.Errorf("SetDefaults: %+v", v.Spec)
	}
	if err := v.Validate(); err != nil {
		t.Error(err)
	}
}

func TestVariantLabels(t *testing.T) {
	objs := mustParse(t, []byte(`
apiVersion: llmd.ai/v1alpha1
kind: VariantAutoscaling
metadata:
  name: v
  namespace: llm-inference
  labels:
    inference.optimization/acceleratorName: A100
    hermod.io/gpus-per-replica: "4"
    hermod.io/max-num-batched-tokens: "16384"
    hermod.io/max-num-seqs: "128"
  annotations:
    note: x
spec:
  scaleTargetRef: {kind: Deployment, name: v}
  modelID: m
`))
	v := objs[0].(*VariantAutoscaling)
	if v.Accelerator() != "A100" || v.GPUsPerReplica() != 4 || v.MaxNumBatchedTokens() != 16384 || v.MaxNumSeqs() != 128 {
		t.Errorf("labels: %q %d %d %d", v.Accelerator(), v.GPUsPerReplica(), v.MaxNumBatchedTokens(), v.MaxNumSeqs())
	}
	if v.Metadata.Namespace != "llm-inference" || v.Metadata.Annotations["note"] != "x" {
		t.Errorf("metadata %+v", v.Metadata)
	}
}

func TestVariantStatus(t *testing.T) {
	objs := mustParse(t, []byte(`
apiVersion: llmd.ai/v1alpha1
kind: VariantAutoscaling
metadata: {name: v}
spec:
  scaleTargetRef: {kind: Deployment, name: v}
  modelID: m
status:
  desiredOptimizedAlloc:
    numReplicas: 3
    lastRunTime: 2025-06-01T12:00:00Z
    accelerator: A100
  actuation:
    applied: true
  conditions:
  - type: TargetResolved
    status: "True"
    reason: Found
    message: deployment found
    lastTransitionTime: "2025-06-01T11:59:00Z"
  - type: MetricsAvailable
    status: Unknown
  - type: OptimizationReady
    status: "False"
`))
	v := objs[0].(*VariantAutoscaling)
	want := VariantAutoscalingStatus{
		DesiredOptimizedAlloc: OptimizedAlloc{
			NumReplicas: 3,
			LastRunTime: time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC),
			Accelerator: "A100",
		},
		Actuation: Actuation{Applied: true},
		Conditions: []Condition{
			{Type: ConditionTargetResolved, Status: ConditionTrue, Reason: "Found", Message: "deployment found",
				LastTransitionTime: time.Date(2025, 6, 1, 11, 59, 0, 0, time.UTC)},
			{Type: ConditionMetricsAvailable, Status: ConditionUnknown},
			{Type: ConditionOptimizationReady, Status: ConditionFalse},
		},
	}
	if !reflect.DeepEqual(v.Status, want) {
		t.Errorf("status\n got %+v\nwant %+v", v.Status, want)
	}
}

const validVA = `apiVersion: llmd.ai/v1alpha1
kind: VariantAutoscaling
metadata:
  name: llama-8b-a10g
spec:
  scaleTargetRef:
    kind: Deployment
    name: llama-8b-a10g
  modelID: meta/llama-3.1-8b
  minReplicas: 1
  maxReplicas: 10
  variantCost: "5.0"
`

// edit replaces old by new in s, failing when old is absent.
func edit(t *testing.T, s, old, new string) string {
	t.Helper()
	if !strings.Contains(s, old) {
		t.Fatalf("%q not in document", old)
	}
	return strings.Replace(s, old, new, 1)
}

func TestVariantValidation(t *testing.T) {
	const obj = `document 1: VariantAutoscaling "llama-8b-a10g": `
	tests := []struct {
		name     string
		old, new string
		want     []string
	}{
		{"unknown spec field", "  maxReplicas: 10\n", "  maxReplica: 10\n",
			[]string{obj + "spec.maxReplica: unknown field"}},
		{"case differs", "  maxReplicas: 10\n", "  MaxReplicas: 10\n",
			[]string{obj + "spec.MaxReplicas: unknown field"}},
		{"unknown top field", "spec:\n", "extra: 1\nspec:\n",
			[]string{obj + "extra: unknown field"}},
		{"unknown metadata field", "  name: llama-8b-a10g\n", "  name: llama-8b-a10g\n  uid: x\n",
			[]string{obj + "metadata.uid: unknown field"}},
		{"name required", "  name: llama-8b-a10g\n", "  namespace: ns\n",
			[]string{"document 1: VariantAutoscaling: metadata.name: required"}},
		{"name with slash", "  name: llama-8b-a10g\n", "  name: llama/8b\n",
			[]string{`document 1: VariantAutoscaling "llama/8b": metadata.name: must be a DNS-1123 subdomain ` +
				`(lowercase letters, digits, '-' and '.', starting and ending with a letter or digit, at most 253 characters), got "llama/8b"`}},
		{"name uppercase", "  name: llama-8b-a10g\n", "  name: Llama\n",
			[]string{`document 1: VariantAutoscaling "Llama": metadata.name: must be a DNS-1123 subdomain ` +
				`(lowercase letters, digits, '-' and '.', starting and ending with a letter or digit, at most 253 characters), got "Llama"`}},
		{"bad namespace", "  name: llama-8b-a10g\n", "  name: llama-8b-a10g\n  namespace: a.b\n",
			[]string{obj + `metadata.namespace: must be a DNS-1123 label (lowercase letters, digits and '-', ` +
				`starting and ending with a letter or digit, at most 63 characters), got "a.b"`}},
		{"kind required", "    kind: Deployment\n", "",
			[]string{obj + "spec.scaleTargetRef.kind: required"}},
		{"target name required", "    name: llama-8b-a10g\n", "",
			[]string{obj + "spec.scaleTargetRef.name: required"}},
		{"modelID required", "  modelID: meta/llama-3.1-8b\n", "",
			[]string{obj + "spec.modelID: required"}},
		{"min negative", "  minReplicas: 1\n", "  minReplicas: -1\n",
			[]string{obj + "spec.minReplicas: must be >= 0, got -1"}},
		{"max zero", "  maxReplicas: 10\n", "  maxReplicas: 0\n",
			[]string{obj + "spec.maxReplicas: must be >= 1, got 0"}},
		{"min above max", "  minReplicas: 1\n", "  minReplicas: 11\n",
			[]string{obj + "spec.minReplicas: must be <= maxReplicas (10), got 11"}},
		{"min above default max", "  maxReplicas: 10\n", "",
			nil},
		{"min above default max 2", "  minReplicas: 1\n  maxReplicas: 10\n", "  minReplicas: 3\n",
			[]string{obj + "spec.minReplicas: must be <= maxReplicas (2, the default), got 3"}},
		{"min equals max", "  minReplicas: 1\n", "  minReplicas: 10\n", nil},
		{"cost not a number", `variantCost: "5.0"`, `variantCost: "cheap"`,
			[]string{obj + `spec.variantCost: must be a finite number >= 0 written as a string, got "cheap"`}},
		{"cost negative", `variantCost: "5.0"`, `variantCost: "-1"`,
			[]string{obj + `spec.variantCost: must be a finite number >= 0 written as a string, got "-1"`}},
		{"cost infinite", `variantCost: "5.0"`, `variantCost: "Inf"`,
			[]string{obj + `spec.variantCost: must be a finite number >= 0 written as a string, got "Inf"`}},
		{"cost NaN", `variantCost: "5.0"`, `variantCost: "NaN"`,
			[]string{obj + `spec.variantCost: must be a finite number >= 0 written as a string, got "NaN"`}},
		{"cost zero", `variantCost: "5.0"`, `variantCost: "0"`, nil},
		{"cost unquoted", `variantCost: "5.0"`, `variantCost: 5.0`,
			[]string{obj + "spec.variantCost: must be a string, got number 5 (quote it)"}},
		{"min not integer", "  minReplicas: 1\n", "  minReplicas: 1.5\n",
			[]string{obj + "spec.minReplicas: must be an integer, got 1.5"}},
		{"min string", "  minReplicas: 1\n", "  minReplicas: one\n",
			[]string{obj + `spec.minReplicas: must be an integer, got string "one"`}},
		{"max out of range", "  maxReplicas: 10\n", "  maxReplicas: 4294967296\n",
			[]string{obj + "spec.maxReplicas: integer out of range, got 4294967296"}},
		{"spec not a mapping", "spec:\n", "spec: [1]\nx:\n",
			[]string{obj + "spec: must be a mapping, got a sequence", obj + "x: unknown field"}},
		{"gpus label", "  name: llama-8b-a10g\n", "  name: llama-8b-a10g\n  labels:\n    hermod.io/gpus-per-replica: two\n",
			[]string{obj + `metadata.labels["hermod.io/gpus-per-replica"]: must be a positive integer, got "two"`}},
		{"gpus label zero", "  name: llama-8b-a10g\n", "  name: llama-8b-a10g\n  labels:\n    hermod.io/gpus-per-replica: \"0\"\n",
			[]string{obj + `metadata.labels["hermod.io/gpus-per-replica"]: must be a positive integer, got "0"`}},
		{"batched tokens label", "  name: llama-8b-a10g\n", "  name: llama-8b-a10g\n  labels:\n    hermod.io/max-num-batched-tokens: \"-5\"\n",
			[]string{obj + `metadata.labels["hermod.io/max-num-batched-tokens"]: must be a positive integer, got "-5"`}},
		{"seqs label", "  name: llama-8b-a10g\n", "  name: llama-8b-a10g\n  labels:\n    hermod.io/max-num-seqs: 1e3\n",
			[]string{obj + `metadata.labels["hermod.io/max-num-seqs"]: must be a string, got number 1000 (quote it)`}},
		{"wrong apiVersion", "apiVersion: llmd.ai/v1alpha1\n", "apiVersion: llmd.ai/v1\n",
			[]string{obj + `apiVersion: must be llmd.ai/v1alpha1, got "llmd.ai/v1"`}},
		{"bad condition", "spec:\n", "status:\n  conditions:\n  - status: Maybe\nspec:\n",
			[]string{obj + "status.conditions[0].type: required",
				obj + `status.conditions[0].status: must be True, False or Unknown, got "Maybe"`}},
		{"bad timestamp", "spec:\n", "status:\n  desiredOptimizedAlloc:\n    lastRunTime: yesterday\nspec:\n",
			[]string{obj + `status.desiredOptimizedAlloc.lastRunTime: must be an RFC 3339 timestamp like 2025-01-02T15:04:05Z, got "yesterday"`}},
		{"negative numReplicas", "spec:\n", "status:\n  desiredOptimizedAlloc:\n    numReplicas: -2\nspec:\n",
			[]string{obj + "status.desiredOptimizedAlloc.numReplicas: must be >= 0, got -2"}},
		{"several problems", "  modelID: meta/llama-3.1-8b\n  minReplicas: 1\n", "  minReplicas: -1\n",
			[]string{obj + "spec.modelID: required", obj + "spec.minReplicas: must be >= 0, got -1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(edit(t, validVA, tt.old, tt.new)))
			if got := errLines(err); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("errors\n got %q\nwant %q", got, tt.want)
			}
			if err != nil {
				var fe *FieldError
				var de *DocumentError
				if !errors.As(err, &fe) || !errors.As(err, &de) || de.Index != 1 {
					t.Errorf("error %v is not a DocumentError{1} wrapping a FieldError", err)
				}
			}
		})
	}
}

func TestVariantValidateDirect(t *testing.T) {
	v := &VariantAutoscaling{Metadata: ObjectMeta{Name: "v"}}
	got := errLines(v.Validate())
	want := []string{
		`VariantAutoscaling "v": apiVersion: must be llmd.ai/v1alpha1, got ""`,
		`VariantAutoscaling "v": kind: must be VariantAutoscaling, got ""`,
		`VariantAutoscaling "v": spec.scaleTargetRef.kind: required`,
		`VariantAutoscaling "v": spec.scaleTargetRef.name: required`,
		`VariantAutoscaling "v": spec.modelID: required`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}
}

func TestParseStream(t *testing.T) {
	tests := []struct {
		name  string
		input string
		kinds []string // object names in order
		want  []string // error lines
	}{
		{name: "empty", input: ""},
		{name: "only separators and comments", input: "---\n# nothing\n---\n\n---\n"},
		{name: "leading separator", input: "---\n" + validVA, kinds: []string{"llama-8b-a10g"}},
		{name: "separator with comment", input: validVA + "--- # next\n" + strings.ReplaceAll(validVA, "llama-8b-a10g", "b"),
			kinds: []string{"llama-8b-a10g", "b"}},
		{name: "---foo is not a separator", input: "---foo: 1\n",
			want: []string{"document 1: kind: required (VariantAutoscaling or ConfigMap)"}},
		{name: "CRLF", input: strings.ReplaceAll(validVA+"---\n"+strings.ReplaceAll(validVA, "llama-8b-a10g", "b"), "\n", "\r\n"),
			kinds: []string{"llama-8b-a10g", "b"}},
		{name: "JSON", input: `{"apiVersion": "llmd.ai/v1alpha1", "kind": "VariantAutoscaling",
	"metadata": {"name": "j"},
	"spec": {"scaleTargetRef": {"kind": "Deployment", "name": "a\/b"}, "modelID": "m", "minReplicas": 0}}`,
			kinds: []string{"j"}},
		{name: "JSON and YAML", input: `{"apiVersion": "llmd.ai/v1alpha1", "kind": "VariantAutoscaling", "metadata": {"name": "j"},
 "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "j"}, "modelID": "m"}}
---
` + validVA, kinds: []string{"j", "llama-8b-a10g"}},
		{name: "JSON unknown field", input: `{"apiVersion": "llmd.ai/v1alpha1", "kind": "VariantAutoscaling", "metadata": {"name": "j"},
 "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "j"}, "modelId": "m"}}`,
			want: []string{`document 1: VariantAutoscaling "j": spec.modelId: unknown field`}},
		{name: "JSON ConfigMap with JSON entries", input: `{"apiVersion": "v1", "kind": "ConfigMap",
 "metadata": {"name": "wva-queueing-model-config"},
 "data": {"default": "{\"sloMultiplier\": 2.5}", "o": "{\"model_id\": \"m\", \"targetITL\": 20}"}}`,
			kinds: []string{"wva-queueing-model-config"}},
		{name: "JSON duplicate key", input: `{"kind": "VariantAutoscaling", "kind": "ConfigMap"}`,
			want: []string{`document 1: invalid JSON: key "kind" repeated in an object`}},
		{name: "YAML duplicate key", input: "kind: VariantAutoscaling\nkind: ConfigMap\n",
			want: []string{`document 1: invalid YAML: unmarshal errors:   line 2: key "kind" already set in map`}},
		{name: "syntax error line counts from stream start", input: validVA + "---\nkind: [\n",
			want: []string{"document 2: invalid YAML: line 14: did not find expected node content"}},
		{name: "not a mapping", input: "- a\n- b\n",
			want: []string{"document 1: must be a mapping with apiVersion and kind, got a sequence"}},
		{name: "unknown kind", input: "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\n",
			want: []string{`document 1: s: kind: must be VariantAutoscaling or ConfigMap, got string "Secret"`}},
		{name: "kind not a string", input: "kind: 5\n",
			want: []string{`document 1: kind: must be VariantAutoscaling or ConfigMap, got number 5`}},
		{name: "document end marker", input: validVA + "...\nkind: Foo\n",
			want: []string{`document 2: kind: must be VariantAutoscaling or ConfigMap, got string "Foo"`}},
		{name: "inline document after separator", input: "--- {kind: Foo}\n",
			want: []string{`document 2: kind: must be VariantAutoscaling or ConfigMap, got string "Foo"`}},
		{name: "errors in several documents", input: validVA + "---\n" + edit(t, validVA, "maxReplicas", "maxReplica") +
			"---\n---\n" + edit(t, validVA, "minReplicas: 1", "minReplicas: 11"),
			want: []string{
				`document 2: VariantAutoscaling "llama-8b-a10g": spec.maxReplica: unknown field`,
				`document 4: VariantAutoscaling "llama-8b-a10g": spec.minReplicas: must be <= maxReplicas (10), got 11`,
			}},
		{name: "infinity", input: "kind: VariantAutoscaling\nx: .inf\n",
			want: []string{"document 1: invalid YAML: .inf and .nan are not allowed"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs, err := Parse([]byte(tt.input))
			if got := errLines(err); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("errors\n got %q\nwant %q", got, tt.want)
			}
			var names []string
			for _, o := range objs {
				names = append(names, o.ObjectName())
			}
			if !reflect.DeepEqual(names, tt.kinds) {
				t.Errorf("objects %q, want %q", names, tt.kinds)
			}
		})
	}
}

const validSaturation = `apiVersion: v1
kind: ConfigMap
metadata:
  name: wva-saturation-scaling-config
data:
  default: |
    kvCacheThreshold: 0.80
    scaleUpThreshold: 0.85
    scaleDownBoundary: 0.70
    acceleratorBudgets:
      A100: 16
  llama-override: |
    model_id: meta/llama-3.1-8b
    namespace: llm-inference
    scaleUpThreshold: 0.90
`

const validQueueing = `apiVersion: v1
kind: ConfigMap
metadata:
  name: wva-queueing-model-config
data:
  default: |
    sloMultiplier: 3.0
  llama-slo: |
    model_id: meta/llama-3.1-8b
    targetTTFT: 500
`

const validScaleToZero = `apiVersion: v1
kind: ConfigMap
metadata:
  name: wva-model-scale-to-zero-config
data:
  default: |
    retention_period: "10m"
  llama-override: |
    model_id: meta/llama-3.1-8b
    enable_scale_to_zero: false
`

func TestConfigMapValidation(t *testing.T) {
	const sat = "document 1: wva-saturation-scaling-config: "
	const que = "document 1: wva-queueing-model-config: "
	const stz = "document 1: wva-model-scale-to-zero-config: "
	tests := []struct {
		name     string
		doc      string
		old, new string
		want     []string
	}{
		{"saturation valid", validSaturation, "", "", nil},
		{"unknown ConfigMap name", validSaturation, "name: wva-saturation-scaling-config", "name: wva-config",
			[]string{`document 1: ConfigMap "wva-config": metadata.name: must be wva-saturation-scaling-config, ` +
				`wva-queueing-model-config or wva-model-scale-to-zero-config, got "wva-config"`}},
		{"ConfigMap name missing", validSaturation, "  name: wva-saturation-scaling-config\n", "  namespace: x\n",
			[]string{`document 1: ConfigMap: metadata.name: required (wva-saturation-scaling-config, ` +
				`wva-queueing-model-config or wva-model-scale-to-zero-config)`}},
		{"ConfigMap apiVersion", validSaturation, "apiVersion: v1", "apiVersion: v2",
			[]string{sat + `apiVersion: must be v1, got "v2"`}},
		{"ConfigMap unknown field", validSaturation, "\ndata:", "\nbinaryData: {}\ndata:",
			[]string{sat + "binaryData: unknown field"}},
		{"data entry not a string", validQueueing, "  default: |\n    sloMultiplier: 3.0\n", "  default:\n    sloMultiplier: 3.0\n",
			[]string{que + "data.default: must be a string, got a mapping (quote it)"}},
		{"entry not a mapping", validQueueing, "    sloMultiplier: 3.0\n", "    - 3.0\n",
			[]string{que + "data.default: must be a YAML mapping of settings, got a sequence"}},
		{"entry syntax", validQueueing, "    sloMultiplier: 3.0\n", "    sloMultiplier: [\n",
			[]string{que + "data.default: invalid YAML: line 1: did not find expected node content"}},
		{"entry with two documents", validQueueing, "    sloMultiplier: 3.0\n", "    sloMultiplier: 3.0\n    ---\n    sloMultiplier: 4\n",
			[]string{que + "data.default: must hold a single YAML document, found a second one"}},
		{"entry syntax error line", validQueueing, "    sloMultiplier: 3.0\n", "    # comment\n    ---\n    sloMultiplier: [\n",
			[]string{que + "data.default: invalid YAML: line 3: did not find expected node content"}},
		{"entry unknown field", validSaturation, "    kvCacheThreshold: 0.80\n", "    kvCacheThreshld: 0.80\n",
			[]string{sat + "data.default.kvCacheThreshld: unknown field"}},
		{"entry wrong type", validSaturation, "    kvCacheThreshold: 0.80\n", "    kvCacheThreshold: high\n",
			[]string{sat + `data.default.kvCacheThreshold: must be a number, got string "high"`}},
		{"bool wrong type", validSaturation, "    kvCacheThreshold: 0.80\n", "    enableLimiter: \"true\"\n",
			[]string{sat + `data.default.enableLimiter: must be a boolean (true or false), got string "true"`}},
		{"analyzerName", validSaturation, "    kvCacheThreshold: 0.80\n", "    analyzerName: slo\n",
			[]string{sat + `data.default.analyzerName: must be "" (saturation-percentage-based) or "saturation" (saturation-token-based), got "slo"`}},
		{"kvCacheThreshold above 1", validSaturation, "kvCacheThreshold: 0.80", "kvCacheThreshold: 1.5",
			[]string{sat + "data.default.kvCacheThreshold: must be in (0, 1], got 1.5"}},
		{"kvCacheThreshold zero", validSaturation, "kvCacheThreshold: 0.80", "kvCacheThreshold: 0",
			[]string{sat + "data.default.kvCacheThreshold: must be in (0, 1], got 0"}},
		{"queueLengthThreshold", validSaturation, "kvCacheThreshold: 0.80", "queueLengthThreshold: 0",
			[]string{sat + "data.default.queueLengthThreshold: must be > 0, got 0"}},
		{"kvSpareTrigger negative", validSaturation, "kvCacheThreshold: 0.80", "kvSpareTrigger: -0.1",
			[]string{sat + "data.default.kvSpareTrigger: must be >= 0, got -0.1"}},
		{"kvSpareTrigger above threshold", validSaturation, "kvCacheThreshold: 0.80", "kvSpareTrigger: 0.8",
			[]string{sat + "data.default.kvSpareTrigger: must be below kvCacheThreshold (0.8), got 0.8"}},
		{"queueSpareTrigger negative", validSaturation, "kvCacheThreshold: 0.80", "queueSpareTrigger: -1",
			[]string{sat + "data.default.queueSpareTrigger: must be >= 0, got -1"}},
		{"queueSpareTrigger above threshold", validSaturation, "kvCacheThreshold: 0.80", "queueSpareTrigger: 6",
			[]string{sat + "data.default.queueSpareTrigger: must be below queueLengthThreshold (5), got 6"}},
		{"scaleUpThreshold above 1", validSaturation, "scaleUpThreshold: 0.85", "scaleUpThreshold: 1.2",
			[]string{sat + "data.default.scaleUpThreshold: must be in (0, 1], got 1.2"}},
		{"scaleUpThreshold 1 allowed", validSaturation, "scaleUpThreshold: 0.85", "scaleUpThreshold: 1", nil},
		{"scaleDownBoundary zero", validSaturation, "scaleDownBoundary: 0.70", "scaleDownBoundary: 0",
			[]string{sat + "data.default.scaleDownBoundary: must be > 0, got 0"}},
		{"scaleDownBoundary above up", validSaturation, "scaleDownBoundary: 0.70", "scaleDownBoundary: 0.9",
			[]string{sat + "data.default.scaleDownBoundary: must be below scaleUpThreshold (0.85), got 0.9"}},
		{"scaleDownBoundary equal up", validSaturation, "scaleDownBoundary: 0.70", "scaleDownBoundary: 0.85",
			[]string{sat + "data.default.scaleDownBoundary: must be below scaleUpThreshold (0.85), got 0.85"}},
		{"up lowered below built-in down", validSaturation, "    scaleDownBoundary: 0.70\n", "",
			nil},
		{"up lowered below built-in down 2", validSaturation, "    scaleUpThreshold: 0.85\n    scaleDownBoundary: 0.70\n", "    scaleUpThreshold: 0.6\n",
			[]string{sat + "data.default.scaleDownBoundary: must be below scaleUpThreshold (0.6), got 0.7 (built-in default)"}},
		{"priority", validSaturation, "kvCacheThreshold: 0.80", "priority: 0",
			[]string{sat + "data.default.priority: must be > 0, got 0"}},
		{"negative budget", validSaturation, "A100: 16", "A100: -1",
			[]string{sat + "data.default.acceleratorBudgets.A100: must be >= 0 GPUs, got -1"}},
		{"fractional budget", validSaturation, "A100: 16", "A100: 1.5",
			[]string{sat + "data.default.acceleratorBudgets.A100: must be an integer, got 1.5"}},
		{"empty accelerator", validSaturation, "A100: 16", `"": 4`,
			[]string{sat + `data.default.acceleratorBudgets[""]: accelerator type must not be empty`}},
		{"budget in override", validSaturation, "    scaleUpThreshold: 0.90\n", "    acceleratorBudgets: {H100: 8}\n",
			[]string{sat + `data.llama-override.acceleratorBudgets: only allowed in the "default" entry (GPU budgets are shared by all models)`}},
		{"override without model_id", validSaturation, "    model_id: meta/llama-3.1-8b\n", "",
			[]string{sat + `data.llama-override.model_id: required in an override entry (every entry but "default" overrides one model)`}},
		{"model_id in default", validSaturation, "    kvCacheThreshold: 0.80\n", "    model_id: m\n    namespace: ns\n",
			[]string{sat + "data.default.model_id: not allowed in the default entry, which applies to every model",
				sat + "data.default.namespace: not allowed in the default entry, which applies to every model"}},
		{"override bad namespace", validSaturation, "namespace: llm-inference", "namespace: LLM",
			[]string{sat + `data.llama-override.namespace: must be a DNS-1123 label (lowercase letters, digits and '-', ` +
				`starting and ending with a letter or digit, at most 63 characters), got "LLM"`}},
		{"override invalid alone", validSaturation, "scaleUpThreshold: 0.90", "scaleUpThreshold: 1.5",
			[]string{sat + "data.llama-override.scaleUpThreshold: must be in (0, 1], got 1.5"}},
		{"override invalid merged", validSaturation, "scaleUpThreshold: 0.90", "scaleUpThreshold: 0.6",
			[]string{sat + "data.llama-override.scaleDownBoundary: must be below scaleUpThreshold (0.6), got 0.7 (inherited from data.default)"}},
		{"override down above default up", validSaturation, "scaleUpThreshold: 0.90", "scaleDownBoundary: 0.86",
			[]string{sat + "data.llama-override.scaleDownBoundary: must be below scaleUpThreshold (0.85), got 0.86"}},
		{"invalid default not repeated on overrides", validSaturation, "kvCacheThreshold: 0.80", "kvCacheThreshold: 2",
			[]string{sat + "data.default.kvCacheThreshold: must be in (0, 1], got 2"}},
		{"duplicate override", validSaturation, "", "  again: |\n    model_id: meta/llama-3.1-8b\n    namespace: llm-inference\n",
			[]string{sat + `data.llama-override.model_id: model_id "meta/llama-3.1-8b" with namespace "llm-inference" is already overridden by data.again`}},
		{"same model other namespace", validSaturation, "", "  again: |\n    model_id: meta/llama-3.1-8b\n    namespace: other\n", nil},
		{"empty entry", validSaturation, "", "  empty: \"\"\n",
			[]string{sat + `data.empty.model_id: required in an override entry (every entry but "default" overrides one model)`}},
		{"queueing valid", validQueueing, "", "", nil},
		{"sloMultiplier 1", validQueueing, "sloMultiplier: 3.0", "sloMultiplier: 1",
			[]string{que + "data.default.sloMultiplier: must be > 1, got 1"}},
		{"targetTTFT negative", validQueueing, "targetTTFT: 500", "targetTTFT: -1",
			[]string{que + "data.llama-slo.targetTTFT: must be >= 0 ms (0 = infer), got -1"}},
		{"targetITL negative", validQueueing, "targetTTFT: 500", "targetITL: -2",
			[]string{que + "data.llama-slo.targetITL: must be >= 0 ms (0 = infer), got -2"}},
		{"targetTTFT zero", validQueueing, "targetTTFT: 500", "targetTTFT: 0", nil},
		{"tuningEnabled type", validQueueing, "sloMultiplier: 3.0", "tuningEnabled: 1",
			[]string{que + "data.default.tuningEnabled: must be a boolean (true or false), got number 1"}},
		{"queueing override model_id", validQueueing, "    model_id: meta/llama-3.1-8b\n", "",
			[]string{que + `data.llama-slo.model_id: required in an override entry (every entry but "default" overrides one model)`}},
		{"scale to zero valid", validScaleToZero, "", "", nil},
		{"retention not a duration", validScaleToZero, `retention_period: "10m"`, `retention_period: "ten minutes"`,
			[]string{stz + `data.default.retention_period: must be a duration like "10m" or "1h30m", got "ten minutes"`}},
		{"retention zero", validScaleToZero, `retention_period: "10m"`, `retention_period: "0s"`,
			[]string{stz + `data.default.retention_period: must be > 0, got "0s"`}},
		{"retention number", validScaleToZero, `retention_period: "10m"`, `retention_period: 600`,
			[]string{stz + `data.default.retention_period: must be a string, got number 600 (quote it)`}},
		{"enable string", validScaleToZero, "enable_scale_to_zero: false", `enable_scale_to_zero: "false"`,
			[]string{stz + `data.llama-override.enable_scale_to_zero: must be a boolean (true or false), got string "false"`}},
		{"scale to zero override model_id", validScaleToZero, "    model_id: meta/llama-3.1-8b\n", "",
			[]string{stz + `data.llama-override.model_id: required in an override entry (every entry but "default" overrides one model)`}},
		{"scale to zero unknown field", validScaleToZero, "enable_scale_to_zero: false", "enableScaleToZero: false",
			[]string{stz + "data.llama-override.enableScaleToZero: unknown field"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := tt.doc + tt.new
			if tt.old != "" {
				doc = edit(t, tt.doc, tt.old, tt.new)
			}
			_, err := Parse([]byte(doc))
			if got := errLines(err); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("errors\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}
