package kubeva

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestDecode(t *testing.T) {
	for _, tc := range []struct {
		name string
		obj  *unstructured.Unstructured
		errs []string // substrings of the error; none: valid
		test func(t *testing.T, u *unstructured.Unstructured)
	}{
		{name: "reference/004's variant", obj: variant("llm", "llama-8b-a10g")},
		{
			name: "defaults: minReplicas 1, maxReplicas 2, variantCost 10",
			obj: variant("llm", "v", func(o map[string]any) {
				delete(spec(o), "minReplicas")
				delete(spec(o), "maxReplicas")
				delete(spec(o), "variantCost")
			}),
		},
		{
			name: "fields of other CRD versions and the status are ignored",
			obj: variant("llm", "v", func(o map[string]any) {
				spec(o)["variantID"] = "meta/llama-3.1-8b-A10G-1"
				spec(o)["accelerator"] = "A10G"
				o["status"] = map[string]any{"desiredOptimizedAlloc": map[string]any{"numReplicas": int64(4)}, "unknown": true}
			}),
		},
		{name: "minReplicas above maxReplicas", obj: variant("llm", "v", func(o map[string]any) { spec(o)["minReplicas"] = int64(11) }),
			errs: []string{"spec.minReplicas", "llm/v"}},
		{name: "no modelID", obj: variant("llm", "v", func(o map[string]any) { delete(spec(o), "modelID") }), errs: []string{"spec.modelID"}},
		{name: "a cost that is not a number", obj: variant("llm", "v", func(o map[string]any) { spec(o)["variantCost"] = "cheap" }),
			errs: []string{"spec.variantCost"}},
		{name: "a count of the wrong type", obj: variant("llm", "v", func(o map[string]any) { spec(o)["maxReplicas"] = "ten" }),
			errs: []string{"spec"}},
		{name: "another API version", obj: variant("llm", "v", func(o map[string]any) { o["apiVersion"] = "llmd.ai/v1" }),
			errs: []string{"apiVersion"}},
		{name: "an invalid GPU label", obj: variant("llm", "v", func(o map[string]any) {
			metadata(o)["labels"] = map[string]any{"hermod.io/gpus-per-replica": "0"}
		}), errs: []string{"hermod.io/gpus-per-replica"}},
		{name: "nil", obj: nil, errs: []string{"nil object"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			va, err := Decode(tc.obj)
			if len(tc.errs) > 0 {
				if err == nil || !errors.Is(err, ErrInvalid) {
					t.Fatalf("Decode = %+v, %v; want an ErrInvalid", va, err)
				}
				for _, w := range tc.errs {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not contain %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if va.Metadata.Namespace != "llm" || va.Spec.ModelID != "meta/llama-3.1-8b" || va.Spec.ScaleTargetRef.Kind != "Deployment" ||
				va.Accelerator() != "A10G" {
				t.Fatalf("Decode = %+v", va)
			}
		})
	}
	va, err := Decode(variant("llm", "llama-8b-a10g"))
	if err != nil {
		t.Fatal(err)
	}
	if va.Min() != 1 || va.Max() != 10 || va.Cost() != 5 || va.Spec.ScaleTargetRef.APIVersion != "apps/v1" || va.Spec.ScaleTargetRef.Name != "llama-8b-a10g" {
		t.Fatalf("reference variant: %+v", va.Spec)
	}
	def, err := Decode(variant("llm", "v", func(o map[string]any) {
		delete(spec(o), "minReplicas")
		delete(spec(o), "maxReplicas")
		delete(spec(o), "variantCost")
	}))
	if err != nil || def.Min() != 1 || def.Max() != 2 || def.Cost() != 10 {
		t.Fatalf("defaults: %+v, %v", def, err)
	}
}
