package kubeva

import (
	"io"
	"log/slog"
	"testing"

	"go.uber.org/goleak"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// newFakeClient returns a fake dynamic client serving VariantAutoscalings.
func newFakeClient(objs ...runtime.Object) *dynamicfake.FakeDynamicClient {
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{GVR: ListKind}, objs...)
}

// variant returns a VariantAutoscaling of namespace ns as the API serves
// it, like reference/004's llama-8b-a10g, changed by mods.
func variant(ns, name string, mods ...func(map[string]any)) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": Group + "/" + Version,
		"kind":       "VariantAutoscaling",
		"metadata": map[string]any{
			"name": name, "namespace": ns, "generation": int64(3), "resourceVersion": "1", "uid": "u-" + name,
			"labels": map[string]any{"inference.optimization/acceleratorName": "A10G"},
		},
		"spec": map[string]any{
			"scaleTargetRef": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
			"modelID":        "meta/llama-3.1-8b",
			"minReplicas":    int64(1),
			"maxReplicas":    int64(10),
			"variantCost":    "5.0",
		},
	}}
	for _, m := range mods {
		m(u.Object)
	}
	return u
}

func spec(o map[string]any) map[string]any { return o["spec"].(map[string]any) }

func metadata(o map[string]any) map[string]any { return o["metadata"].(map[string]any) }
