package attrreport_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/hermod/hermod/libs/plugins/attrreport"
	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/libs/scheduling/schedulingtest"
)

func reporter(t *testing.T, params string) *attrreport.Reporter {
	t.Helper()
	return schedulingtest.New[*attrreport.Reporter](t, schedulingtest.NewHandle(), attrreport.Type, "", params)
}

// The expression's value over the usage, truncated, under the key; the
// condition gates it; zero is not reported.
func TestReportsTheExpressionOverUsage(t *testing.T) {
	r := reporter(t, `{"attributes": [{"key": {"name": "x-gateway-inference-request-cost"},
		"expression": "usage.prompt_tokens * 0.5 + usage.completion_tokens * 2.0 - usage.prompt_token_details.cached_tokens * 0.25",
		"condition": "usage.total_tokens > 10"}]}`)
	got := r.ResponseAttributes(scheduling.Usage{PromptTokens: 101, CompletionTokens: 20, CachedTokens: 40})
	want := []scheduling.Attribute{{Namespace: "envoy.lb", Name: "x-gateway-inference-request-cost", Value: 80}} // 50.5+40-10 = 80.5
	if len(got) != 1 || got[0] != want[0] {
		t.Fatalf("attributes %+v, want %+v", got, want)
	}
	if got := r.ResponseAttributes(scheduling.Usage{PromptTokens: 4, CompletionTokens: 2}); got != nil {
		t.Errorf("condition false: %+v", got)
	}
	zero := reporter(t, `{"attributes": [{"key": {"namespace": "acme", "name": "c"}, "expression": "usage.completion_tokens"}]}`)
	if got := zero.ResponseAttributes(scheduling.Usage{PromptTokens: 9}); got != nil {
		t.Errorf("a zero value was reported: %+v", got)
	}
	if got := zero.ResponseAttributes(scheduling.Usage{CompletionTokens: 3}); len(got) != 1 || got[0].Namespace != "acme" || got[0].Value != 3 {
		t.Errorf("namespace and integer value: %+v", got)
	}
}

func TestParameterErrors(t *testing.T) {
	for params, field := range map[string]string{
		`{}`: "attributes",
		`{"attributes": [{"key": {"name": "a"}, "expression": "1"}, {"key": {"name": "b"}, "expression": "2"}]}`: "attributes",
		`{"attributes": [{"key": {}, "expression": "1"}]}`:                                                       "attributes[0].key.name",
		`{"attributes": [{"key": {"name": "a"}}]}`:                                                               "attributes[0].expression",
		`{"attributes": [{"key": {"name": "a"}, "expression": "usage."}]}`:                                       "attributes[0].expression",
		`{"attributes": [{"key": {"name": "a"}, "expression": "'text'"}]}`:                                       "attributes[0].expression",
		`{"attributes": [{"key": {"name": "a"}, "expression": "1", "condition": "2"}]}`:                          "attributes[0].condition",
	} {
		_, err := schedulingtest.NewErr(schedulingtest.NewHandle(), attrreport.Type, "", params)
		var pe *scheduling.ParamError
		if !errors.As(err, &pe) || !strings.HasSuffix(pe.Path, field) {
			t.Errorf("%s: %v, want an error naming %s", params, err, field)
		}
	}
}
