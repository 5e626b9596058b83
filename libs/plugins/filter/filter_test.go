package filter_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/hermod/hermod/libs/plugins/filter"
	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/libs/scheduling/schedulingtest"
)

// lep builds an endpoint with labels (nil = no labels at all).
func lep(name string, labels map[string]string) *scheduling.Endpoint {
	return schedulingtest.Endpoint(name, labels, &scheduling.Metrics{})
}

// run builds a filter of type typ and returns the names it keeps of in.
func run(t *testing.T, typ, params string, in []*scheduling.Endpoint) []string {
	t.Helper()
	f := schedulingtest.New[scheduling.Filter](t, schedulingtest.NewHandle(), typ, "", params)
	orig := slices.Clone(in)
	dst := make([]*scheduling.Endpoint, 0, len(in))
	out := f.Filter(t.Context(), schedulingtest.CycleState(1), schedulingtest.Completion("r", "m", "hi"), in, dst)
	if !slices.Equal(in, orig) {
		t.Errorf("%s modified its input", typ)
	}
	return schedulingtest.Names(out)
}

// wantParamError checks that building typ with params fails naming field.
func wantParamError(t *testing.T, typ, params, field string) {
	t.Helper()
	_, err := schedulingtest.NewErr(schedulingtest.NewHandle(), typ, "", params)
	if err == nil {
		t.Fatalf("%s %s: expected an error naming %s", typ, params, field)
	}
	if !strings.Contains(err.Error(), field) {
		t.Errorf("%s %s: error %q does not name %s", typ, params, err, field)
	}
	var pe *scheduling.ParamError
	if !errors.As(err, &pe) || pe.Path != field {
		t.Errorf("%s %s: error %v is not a ParamError at %s", typ, params, err, field)
	}
}

func TestRegisteredFilters(t *testing.T) {
	for typ, params := range map[string]string{
		filter.ByLabelType:         `{"label": "a", "validValues": ["x"]}`,
		filter.ByLabelSelectorType: "",
		filter.LabelSelectorType:   "",
		filter.PrefillType:         "",
		filter.DecodeType:          "",
		filter.EncodeType:          "",
	} {
		t.Run(typ, func(t *testing.T) {
			want := typ
			if typ == filter.ByLabelSelectorType { // deprecated: the same filter
				want = filter.LabelSelectorType
			}
			f := schedulingtest.New[scheduling.Filter](t, schedulingtest.NewHandle(), typ, "", params)
			if got := f.TypedName(); got.Type != want || got.Name != typ {
				t.Errorf("TypedName() = %+v, want %q", got, want)
			}
			f = schedulingtest.New[scheduling.Filter](t, schedulingtest.NewHandle(), typ, "mine", params)
			if got := f.TypedName(); got.Type != want || got.Name != "mine" {
				t.Errorf("TypedName() = %+v, want type %q name mine", got, want)
			}
		})
	}
}

func tierEndpoints() []*scheduling.Endpoint {
	return []*scheduling.Endpoint{
		lep("gold", map[string]string{"tier": "gold"}),
		lep("silver", map[string]string{"tier": "silver", "zone": "a"}),
		lep("bronze", map[string]string{"tier": "bronze"}),
		lep("none", nil),
		lep("other-labels", map[string]string{"zone": "a"}),
		lep("empty-value", map[string]string{"tier": ""}),
		lep("case", map[string]string{"tier": "Gold"}),
	}
}

func TestByLabel(t *testing.T) {
	tests := []struct {
		name   string
		params string
		want   []string
	}{
		{"valid values", `{"label": "tier", "validValues": ["gold", "silver"]}`, []string{"gold", "silver"}},
		{"valid values, allowsNoLabel false", `{"label": "tier", "validValues": ["gold"], "allowsNoLabel": false}`, []string{"gold"}},
		{"valid values and allowsNoLabel", `{"label": "tier", "validValues": ["gold", "silver"], "allowsNoLabel": true}`, []string{"gold", "silver", "none", "other-labels"}},
		{"allowsNoLabel only keeps unlabelled", `{"label": "tier", "allowsNoLabel": true}`, []string{"none", "other-labels"}},
		{"allowsNoLabel, empty validValues", `{"label": "tier", "validValues": [], "allowsNoLabel": true}`, []string{"none", "other-labels"}},
		{"empty string is a value", `{"label": "tier", "validValues": [""]}`, []string{"empty-value"}},
		{"no match", `{"label": "tier", "validValues": ["platinum"]}`, nil},
		{"other label key", `{"label": "zone", "validValues": ["a"]}`, []string{"silver", "other-labels"}},
		{"case sensitive", `{"label": "tier", "validValues": ["Gold"]}`, []string{"case"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := run(t, filter.ByLabelType, tc.params, tierEndpoints())
			if !slices.Equal(got, tc.want) {
				t.Errorf("kept %v, want %v", got, tc.want)
			}
		})
	}
}

func TestByLabelValidation(t *testing.T) {
	tests := []struct {
		name   string
		params string
		field  string
	}{
		{"no parameters", "", "parameters.label"},
		{"empty object", `{}`, "parameters.label"},
		{"label missing", `{"validValues": ["a"]}`, "parameters.label"},
		{"label empty", `{"label": "", "validValues": ["a"]}`, "parameters.label"},
		{"label wrong type", `{"label": 1, "validValues": ["a"]}`, "parameters.label"},
		{"validValues missing", `{"label": "tier"}`, "parameters.validValues"},
		{"validValues empty", `{"label": "tier", "validValues": []}`, "parameters.validValues"},
		{"validValues missing, allowsNoLabel false", `{"label": "tier", "allowsNoLabel": false}`, "parameters.validValues"},
		{"validValues not a list", `{"label": "tier", "validValues": "gold"}`, "parameters.validValues"},
		{"allowsNoLabel wrong type", `{"label": "tier", "validValues": ["a"], "allowsNoLabel": "yes"}`, "parameters.allowsNoLabel"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			wantParamError(t, filter.ByLabelType, tc.params, tc.field)
		})
	}
	t.Run("validValues optional with allowsNoLabel", func(t *testing.T) {
		if _, err := schedulingtest.NewErr(schedulingtest.NewHandle(), filter.ByLabelType, "", `{"label": "tier", "allowsNoLabel": true}`); err != nil {
			t.Errorf("unexpected error %v", err)
		}
	})
}

func selectorEndpoints() []*scheduling.Endpoint {
	return []*scheduling.Endpoint{
		lep("a-vllm-gold", map[string]string{"zone": "a", "app": "vllm", "tier": "gold"}),
		lep("b-vllm", map[string]string{"zone": "b", "app": "vllm"}),
		lep("c-sglang", map[string]string{"zone": "c", "app": "sglang"}),
		lep("no-zone", map[string]string{"app": "vllm"}),
		lep("none", nil),
		lep("empty-zone", map[string]string{"zone": ""}),
	}
}

func TestByLabelSelector(t *testing.T) {
	all := []string{"a-vllm-gold", "b-vllm", "c-sglang", "no-zone", "none", "empty-zone"}
	tests := []struct {
		name   string
		params string
		want   []string
	}{
		{"no parameters keeps all", "", all},
		{"empty selector keeps all", `{}`, all},
		{"empty matchLabels and expressions keep all", `{"matchLabels": {}, "matchExpressions": []}`, all},
		{"matchLabels one", `{"matchLabels": {"app": "vllm"}}`, []string{"a-vllm-gold", "b-vllm", "no-zone"}},
		{"matchLabels all must match", `{"matchLabels": {"app": "vllm", "zone": "a"}}`, []string{"a-vllm-gold"}},
		{"matchLabels empty value", `{"matchLabels": {"zone": ""}}`, []string{"empty-zone"}},
		{"matchLabels no match", `{"matchLabels": {"app": "trt"}}`, nil},
		{"In", `{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]}`, []string{"a-vllm-gold", "b-vllm"}},
		{"In excludes absent label", `{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b", "c"]}]}`, []string{"a-vllm-gold", "b-vllm", "c-sglang"}},
		{"NotIn, absent label matches", `{"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["a"]}]}`, []string{"b-vllm", "c-sglang", "no-zone", "none", "empty-zone"}},
		{"NotIn several values", `{"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["a", "b", "c"]}]}`, []string{"no-zone", "none", "empty-zone"}},
		{"Exists", `{"matchExpressions": [{"key": "zone", "operator": "Exists"}]}`, []string{"a-vllm-gold", "b-vllm", "c-sglang", "empty-zone"}},
		{"Exists with empty values list", `{"matchExpressions": [{"key": "tier", "operator": "Exists", "values": []}]}`, []string{"a-vllm-gold"}},
		{"DoesNotExist", `{"matchExpressions": [{"key": "zone", "operator": "DoesNotExist"}]}`, []string{"no-zone", "none"}},
		{"expressions are ANDed", `{"matchExpressions": [{"key": "app", "operator": "In", "values": ["vllm"]}, {"key": "zone", "operator": "Exists"}]}`, []string{"a-vllm-gold", "b-vllm"}},
		{"matchLabels and expressions are ANDed", `{"matchLabels": {"app": "vllm"}, "matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}`, []string{"b-vllm", "no-zone"}},
		{"contradiction keeps none", `{"matchExpressions": [{"key": "zone", "operator": "Exists"}, {"key": "zone", "operator": "DoesNotExist"}]}`, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := run(t, filter.ByLabelSelectorType, tc.params, selectorEndpoints())
			if !slices.Equal(got, tc.want) {
				t.Errorf("kept %v, want %v", got, tc.want)
			}
		})
	}
}

func TestByLabelSelectorMatches(t *testing.T) {
	s := schedulingtest.New[*filter.Selector](t, schedulingtest.NewHandle(), filter.ByLabelSelectorType, "",
		`{"matchLabels": {"app": "vllm"}, "matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["a"]}]}`)
	tests := []struct {
		labels map[string]string
		want   bool
	}{
		{map[string]string{"app": "vllm"}, true},
		{map[string]string{"app": "vllm", "zone": "b"}, true},
		{map[string]string{"app": "vllm", "zone": "a"}, false},
		{map[string]string{"app": "sglang"}, false},
		{nil, false},
	}
	for _, tc := range tests {
		if got := s.Matches(tc.labels); got != tc.want {
			t.Errorf("Matches(%v) = %v, want %v", tc.labels, got, tc.want)
		}
	}
}

func TestByLabelSelectorValidation(t *testing.T) {
	tests := []struct {
		name   string
		params string
		field  string
	}{
		{"unknown operator", `{"matchExpressions": [{"key": "zone", "operator": "Foo", "values": ["a"]}]}`, "parameters.matchExpressions[0].operator"},
		{"operator is case sensitive", `{"matchExpressions": [{"key": "zone", "operator": "in", "values": ["a"]}]}`, "parameters.matchExpressions[0].operator"},
		{"missing operator", `{"matchExpressions": [{"key": "zone"}]}`, "parameters.matchExpressions[0].operator"},
		{"second expression", `{"matchExpressions": [{"key": "zone", "operator": "Exists"}, {"key": "app", "operator": "Equals", "values": ["x"]}]}`, "parameters.matchExpressions[1].operator"},
		{"In with no values", `{"matchExpressions": [{"key": "zone", "operator": "In"}]}`, "parameters.matchExpressions[0].values"},
		{"In with empty values", `{"matchExpressions": [{"key": "zone", "operator": "In", "values": []}]}`, "parameters.matchExpressions[0].values"},
		{"NotIn with no values", `{"matchExpressions": [{"key": "zone", "operator": "NotIn"}]}`, "parameters.matchExpressions[0].values"},
		{"Exists with values", `{"matchExpressions": [{"key": "zone", "operator": "Exists", "values": ["a"]}]}`, "parameters.matchExpressions[0].values"},
		{"DoesNotExist with values", `{"matchExpressions": [{"key": "zone", "operator": "DoesNotExist", "values": ["a"]}]}`, "parameters.matchExpressions[0].values"},
		{"missing key", `{"matchExpressions": [{"operator": "Exists"}]}`, "parameters.matchExpressions[0].key"},
		{"empty key", `{"matchExpressions": [{"key": "", "operator": "Exists"}]}`, "parameters.matchExpressions[0].key"},
		{"values not a list", `{"matchExpressions": [{"key": "zone", "operator": "In", "values": "a"}]}`, "parameters.matchExpressions[0].values"},
		{"matchExpressions not a list", `{"matchExpressions": {"key": "zone"}}`, "parameters.matchExpressions"},
		{"matchLabels not an object", `{"matchLabels": ["app=vllm"]}`, "parameters.matchLabels"},
		{"matchLabels value not a string", `{"matchLabels": {"app": 1}}`, "parameters.matchLabels.app"},
		{"matchLabels empty key", `{"matchLabels": {"": "x"}}`, "parameters.matchLabels"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			wantParamError(t, filter.ByLabelSelectorType, tc.params, tc.field)
		})
	}
}

func roleEndpoints(key string) []*scheduling.Endpoint {
	names := []string{"prefill", "decode", "both", "encode", "encode-prefill", "encode-prefill-decode", "other", "Prefill", ""}
	out := make([]*scheduling.Endpoint, 0, len(names)+1)
	for _, v := range names {
		n := "role-" + v
		if v == "" {
			n = "role-empty"
		}
		out = append(out, lep(n, map[string]string{key: v, "unrelated": "x"}))
	}
	return append(out, lep("no-label", map[string]string{"unrelated": "x"}))
}

func TestRoleFilters(t *testing.T) {
	tests := []struct {
		typ  string
		want []string
	}{
		{filter.PrefillType, []string{"role-prefill"}},
		{filter.DecodeType, []string{"role-decode", "role-both", "no-label"}},
		{filter.EncodeType, []string{"role-encode", "role-encode-prefill", "role-encode-prefill-decode"}},
	}
	for _, tc := range tests {
		t.Run(tc.typ, func(t *testing.T) {
			if got := run(t, tc.typ, "", roleEndpoints(filter.RoleLabel)); !slices.Equal(got, tc.want) {
				t.Errorf("default label: kept %v, want %v", got, tc.want)
			}
			if got := run(t, tc.typ, `{"label": "mif.moreh.io/role"}`, roleEndpoints("mif.moreh.io/role")); !slices.Equal(got, tc.want) {
				t.Errorf("explicit default label: kept %v, want %v", got, tc.want)
			}
			// With the key overridden, the override is read and the
			// default key is ignored.
			const key = "example.com/role"
			if got := run(t, tc.typ, `{"label": "`+key+`"}`, roleEndpoints(key)); !slices.Equal(got, tc.want) {
				t.Errorf("label override: kept %v, want %v", got, tc.want)
			}
			in := roleEndpoints(filter.RoleLabel)
			var want []string
			if tc.typ == filter.DecodeType {
				want = schedulingtest.Names(in) // nobody has the overridden key
			}
			if got := run(t, tc.typ, `{"label": "`+key+`"}`, in); !slices.Equal(got, want) {
				t.Errorf("label override, only default key present: kept %v, want %v", got, want)
			}
		})
	}
}

// Pods labelled the llm-d way (llm-d.ai/role) are filtered with llm-d's
// role values; Heimdall's label wins on a pod that has both.
func TestRoleFiltersLLMDLabel(t *testing.T) {
	pods := func() []*scheduling.Endpoint {
		var out []*scheduling.Endpoint
		for _, r := range []string{"prefill", "decode", "prefill-decode", "both", "encode", "encode-prefill", "encode-prefill-decode"} {
			out = append(out, lep("llmd-"+r, map[string]string{filter.LLMDRoleLabel: r}))
		}
		out = append(out, lep("both-labels", map[string]string{filter.RoleLabel: "prefill", filter.LLMDRoleLabel: "decode"}))
		return out
	}
	for typ, want := range map[string][]string{
		filter.PrefillType: {"llmd-prefill", "llmd-prefill-decode", "llmd-both", "llmd-encode-prefill", "llmd-encode-prefill-decode", "both-labels"},
		filter.DecodeType:  {"llmd-decode", "llmd-prefill-decode", "llmd-both", "llmd-encode-prefill-decode"},
		filter.EncodeType:  {"llmd-encode", "llmd-encode-prefill", "llmd-encode-prefill-decode"},
	} {
		if got := run(t, typ, "", pods()); !slices.Equal(got, want) {
			t.Errorf("%s kept %v, want %v", typ, got, want)
		}
	}
}

func TestRoleFiltersNoLabel(t *testing.T) {
	tests := []struct {
		typ  string
		keep bool
	}{
		{filter.PrefillType, false},
		{filter.DecodeType, true},
		{filter.EncodeType, false},
	}
	for _, tc := range tests {
		t.Run(tc.typ, func(t *testing.T) {
			got := run(t, tc.typ, "", []*scheduling.Endpoint{lep("nil-labels", nil), lep("empty-labels", map[string]string{})})
			if kept := len(got) == 2; kept != tc.keep || (len(got) != 0 && len(got) != 2) {
				t.Errorf("kept %v, want endpoints without a role label kept: %v", got, tc.keep)
			}
		})
	}
}

func TestRoleFilterValidation(t *testing.T) {
	for _, typ := range []string{filter.PrefillType, filter.DecodeType, filter.EncodeType} {
		t.Run(typ, func(t *testing.T) {
			wantParamError(t, typ, `{"label": ""}`, "parameters.label")
			wantParamError(t, typ, `{"label": 5}`, "parameters.label")
			wantParamError(t, typ, `"prefill"`, "parameters")
		})
	}
}

func TestFilterAppendsToDst(t *testing.T) {
	f := schedulingtest.New[scheduling.Filter](t, schedulingtest.NewHandle(), filter.DecodeType, "", "")
	pre := lep("already", nil)
	dst := append(make([]*scheduling.Endpoint, 0, 4), pre)
	in := []*scheduling.Endpoint{lep("p", map[string]string{filter.RoleLabel: "prefill"}), lep("d", map[string]string{filter.RoleLabel: "decode"})}
	out := f.Filter(t.Context(), schedulingtest.CycleState(1), schedulingtest.Completion("r", "m", "hi"), in, dst)
	if got := schedulingtest.Names(out); !slices.Equal(got, []string{"already", "d"}) {
		t.Errorf("out = %v, want [already d]", got)
	}
	if out[0] != pre || out[1] != in[1] {
		t.Errorf("Filter did not append the same endpoint pointers")
	}
}

func TestParametersReported(t *testing.T) {
	type reporter interface{ Parameters() any }
	bl := schedulingtest.New[scheduling.Filter](t, schedulingtest.NewHandle(), filter.ByLabelType, "", `{"label": "tier", "validValues": ["a"], "allowsNoLabel": true}`)
	p, ok := bl.(reporter).Parameters().(filter.ByLabelParams)
	if !ok || p.Label != "tier" || !slices.Equal(p.ValidValues, []string{"a"}) || !p.AllowsNoLabel {
		t.Errorf("by-label Parameters() = %+v", bl.(reporter).Parameters())
	}
	role := schedulingtest.New[scheduling.Filter](t, schedulingtest.NewHandle(), filter.PrefillType, "", "")
	if rp, ok := role.(reporter).Parameters().(filter.RoleParams); !ok || rp.Label != filter.RoleLabel {
		t.Errorf("prefill-filter Parameters() = %+v, want label %s", role.(reporter).Parameters(), filter.RoleLabel)
	}
}
