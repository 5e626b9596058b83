package cli

import (
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
)

const (
	testVariant = `# the cheap variant
apiVersion: llmd.ai/v1alpha1
kind: VariantAutoscaling
metadata:
  name: llama-a10g
spec:
  scaleTargetRef: {kind: Deployment, name: llama-a10g}
  modelID: meta/llama-3.1-8b
  minReplicas: 1
  maxReplicas: 10
  variantCost: "5.0"
`
	testConfigMap = `apiVersion: v1
kind: ConfigMap
metadata:
  name: wva-saturation-scaling-config
data:
  default: |
    kvCacheThreshold: 0.80
  llama: |
    model_id: meta/llama-3.1-8b
    kvCacheThreshold: 0.9
`
)

func TestParseObjects(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want []string // the objects' refs, or with err the error's lines
		err  bool
	}{
		{"variant and configmap", testVariant + "---\n" + testConfigMap,
			[]string{"variantautoscaling/llama-a10g", "configmap/wva-saturation-scaling-config"}, false},
		{"empty documents are skipped", "---\n" + testVariant + "---\n# nothing\n---\n", []string{"variantautoscaling/llama-a10g"}, false},
		{"json", `{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "wva-queueing-model-config"}}`,
			[]string{"configmap/wva-queueing-model-config"}, false},
		{"text after --- starts a document", "--- {apiVersion: llmd.ai/v1alpha1, kind: VariantAutoscaling, metadata: {name: a}}\n",
			[]string{"variantautoscaling/a"}, false},
		{"anchors", "apiVersion: &v v1\nkind: ConfigMap\nmetadata: {name: wva-model-scale-to-zero-config}\nx: *v\n",
			[]string{"configmap/wva-model-scale-to-zero-config"}, false},

		{"nothing", "", []string{errNoObjects.Error()}, true},
		{"only empty documents", "---\n---\n# x\n", []string{errNoObjects.Error()}, true},
		{"documents are counted with the empty ones", "---\n" + testVariant + "---\nkind: Deployment\n",
			[]string{`document 3: kind: must be VariantAutoscaling or ConfigMap, got "Deployment"`,
				"document 3: apiVersion: required", "document 3: metadata.name: required"}, true},
		{"no kind", "apiVersion: v1\nmetadata: {name: x}\n", []string{"document 1: kind: required (VariantAutoscaling or ConfigMap)"}, true},
		{"kind not a string", "apiVersion: v1\nkind: [ConfigMap]\nmetadata: {name: x}\n",
			[]string{"document 1: kind: must be VariantAutoscaling or ConfigMap, got a sequence"}, true},
		{"no apiVersion", "kind: VariantAutoscaling\nmetadata: {name: a}\n",
			[]string{`document 1: VariantAutoscaling "a": apiVersion: required (llmd.ai/v1alpha1)`}, true},
		{"wrong apiVersion", "apiVersion: llmd.ai/v1alpha1\nkind: ConfigMap\nmetadata: {name: wva-queueing-model-config}\n",
			[]string{`document 1: ConfigMap "wva-queueing-model-config": apiVersion: must be v1, got "llmd.ai/v1alpha1"`}, true},
		{"apiVersion not a string", "apiVersion: 1\nkind: ConfigMap\nmetadata: {name: wva-queueing-model-config}\n",
			[]string{`document 1: ConfigMap "wva-queueing-model-config": apiVersion: must be v1, got 1 (int)`}, true},
		{"no metadata", "apiVersion: llmd.ai/v1alpha1\nkind: VariantAutoscaling\n",
			[]string{"document 1: VariantAutoscaling: metadata.name: required"}, true},
		{"metadata not a mapping", "apiVersion: llmd.ai/v1alpha1\nkind: VariantAutoscaling\nmetadata: a\n",
			[]string{`document 1: VariantAutoscaling: metadata: must be a mapping with name, got "a"`}, true},
		{"empty name", "apiVersion: llmd.ai/v1alpha1\nkind: VariantAutoscaling\nmetadata: {name: ''}\n",
			[]string{"document 1: VariantAutoscaling: metadata.name: required"}, true},
		{"name not a string", "apiVersion: llmd.ai/v1alpha1\nkind: VariantAutoscaling\nmetadata: {name: 5}\n",
			[]string{"document 1: VariantAutoscaling: metadata.name: must be a string, got 5 (int)"}, true},
		{"variant name not a key", "apiVersion: llmd.ai/v1alpha1\nkind: VariantAutoscaling\nmetadata: {name: a/b}\n",
			[]string{`document 1: VariantAutoscaling "a/b": metadata.name: must be a DNS-1123 subdomain`}, true},
		{"configmap name", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: my-config}\n",
			[]string{`document 1: ConfigMap "my-config": metadata.name: must be wva-saturation-scaling-config, wva-queueing-model-config, wva-model-scale-to-zero-config, got "my-config"`}, true},
		{"configmap without name", "apiVersion: v1\nkind: ConfigMap\nmetadata: {}\n",
			[]string{"document 1: ConfigMap: metadata.name: required (wva-saturation-scaling-config, wva-queueing-model-config, wva-model-scale-to-zero-config)"}, true},
		{"not a mapping", "- a\n", []string{"document 1: must be a mapping with apiVersion, kind and metadata, got a sequence"}, true},
		{"yaml error lines refer to the stream", testVariant + "---\napiVersion: v1\nkind: [\n",
			[]string{"document 2: yaml: line 14:"}, true},
		{"duplicate", testVariant + "---\n" + testConfigMap + "---\n" + testVariant,
			[]string{`document 3: VariantAutoscaling "llama-a10g": metadata.name: document 1 has the same kind and name`}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := parseObjects([]byte(tc.in))
			if tc.err {
				if err == nil {
					t.Fatalf("accepted: %v", objs)
				}
				lines := strings.Split(err.Error(), "\n")
				if len(lines) != len(tc.want) {
					t.Fatalf("got %d errors, want %d:\n%v", len(lines), len(tc.want), err)
				}
				for i, w := range tc.want {
					if !strings.HasPrefix(lines[i], w) {
						t.Errorf("error %d: got %q, want %q...", i, lines[i], w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, o := range objs {
				got = append(got, o.ref())
			}
			if strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// Each object keeps its document as written, comments included.
func TestParseObjectsKeepsTheDocuments(t *testing.T) {
	objs, err := parseObjects([]byte(testVariant + "---\n" + testConfigMap))
	if err != nil {
		t.Fatal(err)
	}
	if string(objs[0].data) != testVariant || string(objs[1].data) != testConfigMap || objs[0].doc != 1 || objs[1].doc != 2 {
		t.Errorf("%+v", objs)
	}
	if k := objs[1].key("p"); k != "/hermod/autoscaler/p/configmaps/wva-saturation-scaling-config" {
		t.Errorf("key %s", k)
	}
	var de *documentError
	_, err = parseObjects([]byte("kind: x\n"))
	if !errors.As(err, &de) || de.index != 1 {
		t.Errorf("%v is not a documentError", err)
	}
}

func TestParseRef(t *testing.T) {
	for _, tc := range []struct {
		in, kind, name string
		err            bool
	}{
		{"", kindVariant, "", false},
		{"variantautoscalings", kindVariant, "", false},
		{"configmaps", kindConfigMap, "", false},
		{"llama", kindVariant, "llama", false},
		{"variantautoscaling/llama", kindVariant, "llama", false},
		{"configmap/wva-queueing-model-config", kindConfigMap, "wva-queueing-model-config", false},
		{"deployment/llama", "", "", true},
		{"configmap/", "", "", true},
		{"configmap/a/b", "", "", true},
	} {
		kind, name, err := parseRef(tc.in)
		if kind != tc.kind || name != tc.name || (err != nil) != tc.err {
			t.Errorf("%q: %q %q %v", tc.in, kind, name, err)
		}
	}
}

func TestScalingLine(t *testing.T) {
	at := time.Date(2026, 11, 21, 10, 4, 5, 0, time.Local)
	d := &eventsv1.ScalingDecision{ModelId: "meta/llama", Time: timestamppb.New(at), Trigger: "metrics",
		Analyzer: "saturation-percentage-based", Optimizer: "cost-aware",
		Variants: []*eventsv1.VariantDecision{
			{Variant: "a10g", Current: 1, Desired: 3, Applied: true, Reason: "kv spare low"},
			{Variant: "a100", Current: 2, Desired: 0, Error: "no such deployment"},
			{Variant: "h100", Current: 1, Desired: 1},
		}}
	want := "2026-11-21 10:04:05  meta/llama  metrics  saturation-percentage-based/cost-aware  " +
		"a10g 1->3 applied, a100 2->0 error: no such deployment, h100 1->1 not applied  | kv spare low"
	if got := scalingLine(d); got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	d.Reasons = []string{"queue above threshold", "second"}
	if got := scalingLine(d); !strings.HasSuffix(got, "  | queue above threshold") {
		t.Errorf("reasons: %q", got)
	}
	if got := scalingLine(&eventsv1.ScalingDecision{Time: timestamppb.New(at)}); got != "2026-11-21 10:04:05  -  -  -/-  -" {
		t.Errorf("empty: %q", got)
	}
}

func FuzzParseObjects(f *testing.F) {
	for _, s := range []string{testVariant, testConfigMap, testVariant + "---\n" + testConfigMap, "---\n", "--- {a: 1}\n...\n", "- a\n", "kind: [\n",
		`{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "wva-queueing-model-config"}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		objs, err := parseObjects(data)
		if err != nil {
			return
		}
		// Each stored document parses alone as the same object.
		for _, o := range objs {
			again, err := parseObjects(o.data)
			if err != nil || len(again) != 1 || again[0].ref() != o.ref() {
				t.Fatalf("document %d (%s) alone: %v %v", o.doc, o.ref(), again, err)
			}
		}
	})
}
