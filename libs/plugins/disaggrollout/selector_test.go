package disaggrollout

import (
	"strings"
	"testing"
)

// The string form of Kubernetes label selectors: each operator's meaning,
// on a label present, absent or different.
func TestSelectorMatches(t *testing.T) {
	labels := map[string]string{"app": "vllm", "disaggregatedset.x-k8s.io/name": "my-set", "tier": "", "gen": "7"}
	for sel, want := range map[string]bool{
		"":                                      true,
		"app=vllm":                              true,
		"app==vllm":                             true,
		" app = vllm ":                          true,
		"app=sglang":                            false,
		"app!=sglang":                           true,
		"missing!=x":                            true,
		"app!=vllm":                             false,
		"app in (sglang, vllm)":                 true,
		"app in(vllm)":                          true,
		"app in (sglang)":                       false,
		"missing in (x)":                        false,
		"app notin (sglang)":                    true,
		"missing notin (x)":                     true,
		"app notin (vllm,x)":                    false,
		"app":                                   true,
		"missing":                               false,
		"!missing":                              true,
		"!app":                                  false,
		"tier=":                                 true,
		"tier":                                  true,
		"gen>6":                                 true,
		"gen>7":                                 false,
		"gen<8":                                 true,
		"app>1":                                 false,
		"missing<5":                             false,
		"disaggregatedset.x-k8s.io/name=my-set": true,
		"disaggregatedset.x-k8s.io/name=my-set,app in (vllm),!canary": true,
		"disaggregatedset.x-k8s.io/name=my-set,app=sglang":            false,
	} {
		s, err := parseSelector(sel)
		if err != nil {
			t.Errorf("%q: %v", sel, err)
			continue
		}
		if got := s.matches(labels); got != want {
			t.Errorf("%q matches %v, want %v", sel, got, want)
		}
	}
}

func TestSelectorErrors(t *testing.T) {
	for sel, want := range map[string]string{
		"a=b,":                         "empty requirement",
		",a=b":                         "empty requirement",
		"a in (x":                      "unbalanced '('",
		"a in x)":                      "unbalanced ')'",
		"a in ()":                      "empty",
		"a in x":                       "parenthesised list",
		"a ~ b":                        "expected an operator",
		"a inn (x)":                    "expected an operator",
		"a=b c":                        "only letters, digits",
		"a=-b":                         "begin and end",
		"-a=b":                         "begin and end",
		"a>b":                          "not an integer",
		"Example.com/a=b":              "not a DNS subdomain",
		"/a=b":                         "prefix must be",
		"!":                            "empty name",
		"a=" + strings.Repeat("x", 64): "longer than 63",
	} {
		if _, err := parseSelector(sel); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", sel, err, want)
		}
	}
}

// String is read back to a selector with the same meaning.
func TestSelectorStringRoundTrips(t *testing.T) {
	in := " b notin (z,y) , a in (y, x,x),!c,d, e != f, g==h,i>3,j<4"
	s, err := parseSelector(in)
	if err != nil {
		t.Fatal(err)
	}
	want := "b notin (y,z),a in (x,y),!c,d,e!=f,g=h,i>3,j<4"
	if got := s.String(); got != want {
		t.Fatalf("String %q, want %q", got, want)
	}
	again, err := parseSelector(s.String())
	if err != nil || again.String() != want {
		t.Errorf("read back: %v %v", again, err)
	}
}

func FuzzParseSelector(f *testing.F) {
	for _, s := range []string{"", "a=b", "a in (x,y),!b", "x.io/k notin (a),k>3", "a=(", "!,"} {
		f.Add(s)
	}
	labels := map[string]string{"a": "b", "x.io/k": "a", "k": "4"}
	f.Fuzz(func(t *testing.T, in string) {
		s, err := parseSelector(in)
		if err != nil {
			return
		}
		again, err := parseSelector(s.String())
		if err != nil {
			t.Fatalf("%q: String %q does not parse: %v", in, s.String(), err)
		}
		if again.String() != s.String() || again.matches(labels) != s.matches(labels) {
			t.Fatalf("%q: %q read back as %q", in, s.String(), again.String())
		}
	})
}
