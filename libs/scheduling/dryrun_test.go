package scheduling_test

import (
	"testing"

	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/libs/scheduling/schedulingtest"
)

// The dry run finds the profiles whose label filters leave none of the
// registered endpoints, naming the filter, and skips the filters of the
// request and of the load (they cannot be judged without one).
func TestUnmatchedDryRun(t *testing.T) {
	s := schedulingtest.Scheduler(t, `
plugins:
- type: disagg-headers-handler
- type: always-disagg-pd-decider
- {type: by-label, name: gold, parameters: {label: tier, validValues: [gold]}}
- {type: by-label-selector, name: a100, parameters: {matchLabels: {gpu: a100}}}
- {type: context-length-aware, name: ctx}
- {type: queue-scorer}
- {type: max-score-picker}
- {type: disagg-profile-handler, parameters: {deciders: {prefill: always-disagg-pd-decider}}}
schedulingProfiles:
- name: decode
  plugins: [{pluginRef: ctx}, {pluginRef: gold}, {pluginRef: queue-scorer}, {pluginRef: max-score-picker}]
- name: prefill
  plugins: [{pluginRef: gold}, {pluginRef: a100}, {pluginRef: max-score-picker}]
`)
	eps := schedulingtest.Endpoints(3)
	eps[0].Labels = map[string]string{"tier": "gold", "gpu": "h100"}
	eps[1].Labels = map[string]string{"tier": "silver", "gpu": "a100"}
	got := s.Unmatched(ctx, eps)
	if len(got) != 1 || got[0] != (scheduling.Unmatch{Profile: "prefill", Filter: "a100 (label-selector-filter)", Endpoints: 3}) {
		t.Fatalf("unmatched %+v, want prefill's a100 selector", got)
	}
	eps[0].Labels["gpu"] = "a100"
	if got := s.Unmatched(ctx, eps); len(got) != 0 {
		t.Fatalf("unmatched %+v with a gold a100 endpoint", got)
	}
	if got := s.Unmatched(ctx, nil); len(got) != 2 || got[0].Filter != "gold (by-label)" {
		t.Fatalf("no endpoints: %+v, want decode and prefill, left empty by gold", got)
	}
}
