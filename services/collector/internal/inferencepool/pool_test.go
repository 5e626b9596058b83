package inferencepool

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// object returns an InferencePool of namespace models as the dynamic
// client serves it, with spec.
func object(name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": Group + "/" + Version,
		"kind":       Kind,
		"metadata":   map[string]any{"name": name, "namespace": "models", "resourceVersion": "7"},
		"spec":       spec,
	}}
	return u
}

// spec returns a spec selecting app=vllm on ports, changed by mods.
func spec(ports []int64, mods ...func(map[string]any)) map[string]any {
	tps := make([]any, len(ports))
	for i, p := range ports {
		tps[i] = map[string]any{"number": p}
	}
	s := map[string]any{
		"selector":    map[string]any{"matchLabels": map[string]any{"app": "vllm"}},
		"targetPorts": tps,
	}
	for _, m := range mods {
		m(s)
	}
	return s
}

func TestDecode(t *testing.T) {
	for _, tc := range []struct {
		name string
		obj  *unstructured.Unstructured
		want *Pool
		errs []string // substrings of the error; none: valid
	}{
		{
			name: "minimal",
			obj:  object("llama", spec([]int64{8000})),
			want: &Pool{Namespace: "models", Name: "llama", ResourceVersion: "7", Selector: map[string]string{"app": "vllm"}, TargetPorts: []int{8000}},
		},
		{
			name: "every field read, unknown ones ignored",
			obj: object("llama", spec([]int64{8000, 8001, 8002}, func(s map[string]any) {
				s["selector"] = map[string]any{"matchLabels": map[string]any{"app": "vllm", "llm-d.ai/role": "decode"}}
				s["appProtocol"] = "kubernetes.io/h2c"
				s["endpointPickerRef"] = map[string]any{"group": "", "kind": "Service", "name": "hermod-picker",
					"port": map[string]any{"number": int64(9002)}, "failureMode": "FailOpen"}
				s["futureField"] = map[string]any{"x": true}
			})),
			want: &Pool{
				Namespace: "models", Name: "llama", ResourceVersion: "7",
				Selector:    map[string]string{"app": "vllm", "llm-d.ai/role": "decode"},
				TargetPorts: []int{8000, 8001, 8002}, AppProtocol: "kubernetes.io/h2c",
				EndpointPicker: &EndpointPickerRef{Kind: "Service", Name: "hermod-picker", Port: 9002, FailureMode: FailOpen},
			},
		},
		{
			name: "endpoint picker defaults",
			obj: object("llama", spec([]int64{8000}, func(s map[string]any) {
				s["endpointPickerRef"] = map[string]any{"name": "epp"}
			})),
			want: &Pool{
				Namespace: "models", Name: "llama", ResourceVersion: "7", Selector: map[string]string{"app": "vllm"}, TargetPorts: []int{8000},
				EndpointPicker: &EndpointPickerRef{Kind: "Service", Name: "epp", FailureMode: FailClose},
			},
		},
		{name: "no selector", obj: object("x", spec([]int64{8000}, func(s map[string]any) { delete(s, "selector") })),
			errs: []string{"spec.selector.matchLabels: empty"}},
		{name: "invalid label", obj: object("x", spec([]int64{8000}, func(s map[string]any) {
			s["selector"] = map[string]any{"matchLabels": map[string]any{"bad key!": "v", "app": "not valid!"}}
		})), errs: []string{`key "bad key!"`, `matchLabels[app]: value "not valid!"`}},
		{name: "no ports", obj: object("x", spec(nil)), errs: []string{"spec.targetPorts: none"}},
		{name: "nine ports", obj: object("x", spec([]int64{1, 2, 3, 4, 5, 6, 7, 8, 9})), errs: []string{"9 ports, at most 8"}},
		{name: "bad and duplicate ports", obj: object("x", spec([]int64{8000, 0, 70000, 8000})),
			errs: []string{"targetPorts[1].number: 0", "targetPorts[2].number: 70000", "targetPorts[3].number: 8000 appears twice"}},
		{name: "port of the wrong type", obj: object("x", spec(nil, func(s map[string]any) {
			s["targetPorts"] = []any{map[string]any{"number": "8000"}}
		})), errs: []string{"models/x"}},
		{name: "another kind", obj: func() *unstructured.Unstructured {
			u := object("x", spec([]int64{8000}))
			u.SetAPIVersion("inference.networking.x-k8s.io/v1alpha2")
			return u
		}(), errs: []string{"is not an InferencePool.inference.networking.k8s.io"}},
		{name: "nil", obj: nil, errs: []string{"nil object"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Decode(tc.obj)
			if len(tc.errs) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, tc.want) {
					t.Fatalf("Decode =\n%+v\nwant\n%+v", got, tc.want)
				}
				return
			}
			if err == nil || !errors.Is(err, ErrInvalid) {
				t.Fatalf("Decode = %+v, %v; want an ErrInvalid", got, err)
			}
			for _, w := range tc.errs {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestSameTarget(t *testing.T) {
	base := func() *Pool {
		return &Pool{Namespace: "m", Name: "p", Selector: map[string]string{"app": "vllm"}, TargetPorts: []int{8000, 8001}, ResourceVersion: "1"}
	}
	other := base()
	other.ResourceVersion, other.EndpointPicker = "2", &EndpointPickerRef{Name: "x"}
	relabelled, reported, reordered := base(), base(), base()
	relabelled.Selector = map[string]string{"app": "sglang"}
	reported.TargetPorts = []int{8000}
	reordered.TargetPorts = []int{8001, 8000}
	for _, tc := range []struct {
		name string
		a, b *Pool
		want bool
	}{
		{"equal but for version and picker", base(), other, true},
		{"both none", nil, nil, true},
		{"one none", base(), nil, false},
		{"selector", base(), relabelled, false},
		{"ports", base(), reported, false},
		{"port order (ranks)", base(), reordered, false},
	} {
		if got := SameTarget(tc.a, tc.b); got != tc.want {
			t.Errorf("%s: SameTarget = %v, want %v", tc.name, got, tc.want)
		}
	}
	if got := base().LabelSelector().String(); got != "app=vllm" {
		t.Errorf("LabelSelector = %q", got)
	}
}
