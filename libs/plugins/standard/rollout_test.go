package standard_test

import (
	"fmt"
	"math"
	"net/http"
	"testing"

	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/libs/scheduling/schedulingtest"
)

// rolloutConfig is the configuration of the llm-d router's
// disaggregatedset-rollout-screener documentation, unchanged, with a Pod
// k8s-notification-source declared as its upstream data layer would have
// it.
const rolloutConfig = `
apiVersion: llm-d.ai/v1alpha1
kind: EndpointPickerConfig
plugins:
- type: k8s-notification-source
  parameters: {group: "", version: v1, kind: Pod}
- type: disaggregatedset-rollout-screener
  name: rollout-screener
  parameters:
    scope:
      labelSelector: "disaggregatedset.x-k8s.io/name=my-set"
    headerSelectors:
    - name: revision
      headerName: x-disagg-revision
      labelKey: disaggregatedset.x-k8s.io/revision
      mode: strict
    - name: slice
      headerName: x-disagg-slice
      labelKey: disaggregatedset.x-k8s.io/slice
      mode: prefer
    revisionGating:
      mode: max-role
      requireRoles:
        values: [prefill, decode]
- type: header-label-affinity-scorer
  name: slice-affinity
  parameters:
    headerName: x-disagg-slice
    labelKey: disaggregatedset.x-k8s.io/slice
- type: weighted-random-picker
  name: picker

schedulingProfiles:
- name: decode
  plugins:
  - pluginRef: slice-affinity
    weight: 3
  - pluginRef: picker
`

// rolloutStep is a DisaggregatedSet's Ready pods at one step of a
// rollout from revision a to b: each pod in slice 0 or 1 by its index.
func rolloutStep(oldP, oldD, newP, newD int) []*scheduling.Endpoint {
	var eps []*scheduling.Endpoint
	add := func(rev, role string, n int) {
		for i := range n {
			e := scheduling.NewEndpoint(fmt.Sprintf("%s-%s-%d", rev, role, i), fmt.Sprintf("10.2.%d.%d", len(eps)/200, len(eps)%200+1), 8000, map[string]string{
				"disaggregatedset.x-k8s.io/name": "my-set", "disaggregatedset.x-k8s.io/revision": rev,
				"disaggregatedset.x-k8s.io/role": role, "disaggregatedset.x-k8s.io/slice": fmt.Sprintf("s%d", i%2),
			})
			e.Metrics = &scheduling.Metrics{}
			eps = append(eps, e)
		}
	}
	add("a", "prefill", oldP)
	add("a", "decode", oldD)
	add("b", "prefill", newP)
	add("b", "decode", newD)
	return eps
}

// Through the steps of a 2P:10D rollout (maxUnavailable 2), the requests
// follow the max-role shares: none to the new revision while it has no
// prefill pod, then 40%, 60%, 80% of them; a request naming a slice lands
// in it; every response says which revision and slice served it.
func TestDisaggregatedSetRollout(t *testing.T) {
	s := schedulingtest.Scheduler(t, rolloutConfig)
	for _, step := range []struct {
		name                   string
		oldP, oldD, newP, newD int
		newShare               float64
	}{
		{"step 2", 2, 8, 0, 2, 0},
		{"step 4", 1, 6, 1, 4, 0.4},
		{"step 6", 1, 4, 1, 6, 0.6},
		{"step 8", 1, 2, 1, 8, 0.8},
		{"step 10", 0, 0, 2, 10, 1},
	} {
		eps := rolloutStep(step.oldP, step.oldD, step.newP, step.newD)
		const n = 4000
		toNew := 0
		for i := range n {
			req := schedulingtest.Completion(fmt.Sprintf("%s-%d", step.name, i), "m", "hello")
			res, err := s.Schedule(ctx, req, eps)
			if err != nil {
				t.Fatalf("%s: %v", step.name, err)
			}
			if res.Target().Endpoint.Labels["disaggregatedset.x-k8s.io/revision"] == "b" {
				toNew++
			}
			res.Release()
		}
		if got := float64(toNew) / n; math.Abs(got-step.newShare) > 0.04 {
			t.Errorf("%s: %.3f of the requests to the new revision, want %.2f", step.name, got, step.newShare)
		}
	}

	eps := rolloutStep(1, 6, 1, 4)
	req := schedulingtest.Completion("sliced", "m", "hello")
	req.Headers = map[string]string{"x-disagg-slice": "s1"}
	res, err := s.Schedule(ctx, req, eps)
	if err != nil {
		t.Fatal(err)
	}
	resp := scheduling.NewResponse(res, http.StatusOK)
	s.ResponseReceived(ctx, req, resp)
	target := res.Target().Endpoint
	if target.Labels["disaggregatedset.x-k8s.io/slice"] != "s1" || resp.Headers["x-disagg-slice"] != "s1" ||
		resp.Headers["x-disagg-revision"] != target.Labels["disaggregatedset.x-k8s.io/revision"] {
		t.Errorf("routed to %s %v, response headers %v", target.Name, target.Labels, resp.Headers)
	}
	res.Release()

	pinned := schedulingtest.Completion("pinned", "m", "hello")
	pinned.Headers = map[string]string{"x-disagg-revision": "b"}
	if _, err := s.Schedule(ctx, pinned, rolloutStep(2, 8, 0, 2)); scheduling.HTTPStatus(err) != http.StatusServiceUnavailable {
		t.Errorf("pinned to a revision without prefill pods: %v", err)
	}
}
