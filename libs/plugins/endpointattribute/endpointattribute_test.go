package endpointattribute

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/libs/scheduling/schedulingtest"
)

const gpu = "GPUUtilization/dcgm-extractor"

// pods builds endpoints with the given GPU utilisation (a negative value:
// none reported) and waiting queues 0, 1, 2, ...
func pods(utils ...float64) []*scheduling.Endpoint {
	eps := schedulingtest.Endpoints(len(utils))
	for i, u := range utils {
		eps[i].Metrics.WaitingRequests = i
		if u >= 0 {
			eps[i].Metrics.Attributes = map[string]float64{gpu: u}
		}
	}
	return eps
}

func filter(t *testing.T, params string, eps []*scheduling.Endpoint) []string {
	t.Helper()
	f := schedulingtest.New[*Filter](t, schedulingtest.NewHandle(), FilterType, "", params)
	return schedulingtest.Names(f.Filter(context.Background(), nil, nil, eps, nil))
}

func TestThresholdFilter(t *testing.T) {
	eps := pods(0.5, 0.95, 0.9, -1)
	const le = `"algorithm": {"type": "threshold", "threshold": {"operator": "LessThanOrEqual", "value": 0.9}}`
	if got := filter(t, `{"attribute": "`+gpu+`", `+le+`}`, eps); !slices.Equal(got, []string{"pod-0", "pod-2", "pod-3"}) {
		t.Errorf("onMissing Pass (default): kept %v", got)
	}
	if got := filter(t, `{"attribute": "`+gpu+`", "onMissing": "Fail", `+le+`}`, eps); !slices.Equal(got, []string{"pod-0", "pod-2"}) {
		t.Errorf("onMissing Fail: kept %v", got)
	}
	const none = `"algorithm": {"type": "threshold", "threshold": {"operator": "GreaterThan", "value": 2}}`
	if got := filter(t, `{"attribute": "`+gpu+`", "onMissing": "Fail", `+none+`}`, eps); len(got) != 0 {
		t.Errorf("nothing passes: kept %v", got)
	}
	if got := filter(t, `{"attribute": "`+gpu+`", "onMissing": "Fail", "fallbackOnEmpty": true, `+none+`}`, eps); len(got) != 4 {
		t.Errorf("fallbackOnEmpty: kept %v, want every candidate", got)
	}
	// An engine gauge under its core-metrics-extractor key.
	const q = `"algorithm": {"type": "threshold", "threshold": {"operator": "NotEqual", "value": 1}}`
	if got := filter(t, `{"attribute": "WaitingQueueSize", `+q+`}`, eps); !slices.Equal(got, []string{"pod-0", "pod-2", "pod-3"}) {
		t.Errorf("WaitingQueueSize != 1: kept %v", got)
	}
}

func TestOperators(t *testing.T) {
	for op, want := range map[Operator][3]bool{ // 1 op 2, 2 op 2, 3 op 2
		LessThan:           {true, false, false},
		LessThanOrEqual:    {true, true, false},
		GreaterThan:        {false, false, true},
		GreaterThanOrEqual: {false, true, true},
		Equal:              {false, true, false},
		NotEqual:           {true, false, true},
	} {
		for i, v := range []float64{1, 2, 3} {
			if got := op.holds(v, 2); got != want[i] {
				t.Errorf("%v %s 2 = %v", v, op, got)
			}
		}
	}
}

func score(t *testing.T, params string, eps []*scheduling.Endpoint) []float64 {
	t.Helper()
	s := schedulingtest.New[*Scorer](t, schedulingtest.NewHandle(), ScorerType, "", params)
	return schedulingtest.Score(s, schedulingtest.CycleState(1), nil, eps)
}

func TestLinearScores(t *testing.T) {
	eps := pods(0.2, 0.6, 1.0, -1)
	fixed := score(t, `{"attributeKey": "`+gpu+`", "algorithm": {"type": "linear_lower_is_better", "normalization": {"fixedRange": {"min": 0, "max": 1}}}}`, eps)
	if want := []float64{0.8, 0.4, 0, 0}; !near(fixed, want) {
		t.Errorf("fixed range, lower is better: %v, want %v", fixed, want)
	}
	adaptive := score(t, `{"attributeKey": "`+gpu+`", "algorithm": {"type": "linear_higher_is_better"}}`, eps)
	if want := []float64{0, 0.5, 1, 0}; !near(adaptive, want) {
		t.Errorf("adaptive range, higher is better: %v, want %v", adaptive, want)
	}
	clamped := score(t, `{"attributeKey": "WaitingQueueSize", "algorithm": {"type": "linear_lower_is_better", "normalization": {"fixedRange": {"min": 1, "max": 2}}}}`, eps)
	if want := []float64{1, 1, 0, 0}; !near(clamped, want) {
		t.Errorf("values outside the fixed range: %v, want %v", clamped, want)
	}
	same := score(t, `{"attributeKey": "`+gpu+`", "algorithm": {"type": "linear_lower_is_better"}}`, pods(0.3, 0.3, -1))
	if want := []float64{1, 1, 0}; !near(same, want) {
		t.Errorf("one value for all: %v, want %v", same, want)
	}
}

func near(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if d := a[i] - b[i]; d > 1e-9 || d < -1e-9 {
			return false
		}
	}
	return true
}

func TestParameterErrors(t *testing.T) {
	for params, field := range map[string]string{
		`{"algorithm": {"type": "threshold", "threshold": {"operator": "LessThan", "value": 1}}}`:                                        "attribute",
		`{"attribute": "a", "onMissing": "Skip", "algorithm": {"type": "threshold", "threshold": {"operator": "LessThan", "value": 1}}}`: "onMissing",
		`{"attribute": "a", "algorithm": {"type": "percentile"}}`:                                                                        "algorithm.type",
		`{"attribute": "a", "algorithm": {"type": "threshold"}}`:                                                                         "algorithm.threshold",
		`{"attribute": "a", "algorithm": {"type": "threshold", "threshold": {"operator": "Below", "value": 1}}}`:                         "operator",
		`{"attribute": "a", "algorithm": {"type": "threshold", "threshold": {"operator": "LessThan"}}}`:                                  "value",
	} {
		if _, err := schedulingtest.NewErr(schedulingtest.NewHandle(), FilterType, "", params); err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("filter %s: %v, want an error naming %s", params, err, field)
		}
	}
	for params, field := range map[string]string{
		`{"algorithm": {"type": "linear_lower_is_better"}}`:                                                                                                  "attributeKey",
		`{"attributeKey": "a", "algorithm": {"type": "log"}}`:                                                                                                "algorithm.type",
		`{"attributeKey": "a", "algorithm": {"type": "linear_lower_is_better", "normalization": {"fixedRange": {"min": 1, "max": 1}}}}`:                      "fixedRange",
		`{"attributeKey": "a", "algorithm": {"type": "linear_lower_is_better", "normalization": {"adaptiveRange": {}, "fixedRange": {"min": 0, "max": 1}}}}`: "normalization",
	} {
		if _, err := schedulingtest.NewErr(schedulingtest.NewHandle(), ScorerType, "", params); err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("scorer %s: %v, want an error naming %s", params, err, field)
		}
	}
}
