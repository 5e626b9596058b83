package decisions_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	_ "github.com/hermod/hermod/libs/plugins/standard"
	"github.com/hermod/hermod/libs/scheduling/decisions"
	"github.com/hermod/hermod/libs/scheduling/schedulingtest"
)

func TestDecisionCarriesEveryScore(t *testing.T) {
	s := schedulingtest.Scheduler(t, `
plugins:
- {type: queue-scorer}
- {type: kv-cache-utilization-scorer, name: kv}
- {type: max-score-picker, parameters: {maxNumOfEndpoints: 2}}
schedulingProfiles:
- name: default
  plugins:
  - {pluginRef: queue-scorer, weight: 2}
  - {pluginRef: kv}
  - {pluginRef: max-score-picker}
`)
	eps := schedulingtest.Waiting(4, 0, 2)
	eps[0].Metrics.KVCacheUsage = 0.5
	req := schedulingtest.Completion("req-1", "llama", "hello")
	req.Adapter = "sql-lora"
	res, err := s.Schedule(context.Background(), req, eps)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Release()
	at := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	res.Time = at
	d := decisions.Event("pool-a", req, res)

	if d.GetDecisionId() != decisions.ID(res.DecisionID) || len(d.GetDecisionId()) != 16 || d.GetRequestId() != "req-1" || d.GetPool() != "pool-a" || d.GetModel() != "llama" ||
		d.GetAdapter() != "sql-lora" || !d.GetTime().AsTime().Equal(at) {
		t.Errorf("header fields: %v", d)
	}
	if d.GetPrimaryName() != "pod-1" || d.GetPrimaryEndpoint() != "10.0.0.2:8000" || d.GetPrefillEndpoint() != "" {
		t.Errorf("primary = %s %s", d.GetPrimaryName(), d.GetPrimaryEndpoint())
	}
	if len(d.GetProfiles()) != 1 {
		t.Fatalf("profiles = %v", d.GetProfiles())
	}
	p := d.GetProfiles()[0]
	if p.GetProfile() != "default" || p.GetRole() != eventsv1.ProfileRole_PROFILE_ROLE_PRIMARY || p.GetError() != "" {
		t.Errorf("profile = %v", p)
	}
	if got := p.GetScorers(); len(got) != 2 || got[0].GetName() != "queue-scorer" || got[0].GetWeight() != 2 || got[1].GetName() != "kv" || got[1].GetType() != "kv-cache-utilization-scorer" {
		t.Errorf("scorers = %v", got)
	}
	// queue: waiting 4, 0, 2 -> 0, 1, 0.5; kv: 0.5, 1, 1.
	want := map[string][2]float64{"pod-0": {0, 0.5}, "pod-1": {1, 1}, "pod-2": {0.5, 1}}
	for _, e := range p.GetEndpoints() {
		w := want[e.GetName()]
		if e.GetScores()[0] != w[0] || e.GetScores()[1] != w[1] || e.GetTotal() != 2*w[0]+w[1] {
			t.Errorf("%s: scores %v total %v, want %v", e.GetName(), e.GetScores(), e.GetTotal(), w)
		}
	}
	if strings.Join(p.GetTargets(), ",") != "10.0.0.2:8000,10.0.0.3:8000" {
		t.Errorf("targets = %v", p.GetTargets())
	}
	// The event survives the wire.
	b, err := proto.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	var back eventsv1.RoutingDecision
	if err := proto.Unmarshal(b, &back); err != nil || !proto.Equal(&back, d) {
		t.Errorf("round trip: %v", err)
	}
}

func TestDecisionDisaggregated(t *testing.T) {
	s := schedulingtest.Scheduler(t, `
plugins:
- type: disagg-headers-handler
- type: always-disagg-pd-decider
- type: prefill-filter
- type: decode-filter
- type: disagg-profile-handler
  parameters: {deciders: {prefill: always-disagg-pd-decider}}
schedulingProfiles:
- {name: prefill, plugins: [{pluginRef: prefill-filter}]}
- {name: decode, plugins: [{pluginRef: decode-filter}]}
`)
	eps := schedulingtest.Endpoints(2)
	eps[0].Labels = map[string]string{"mif.moreh.io/role": "prefill"}
	eps[1].Labels = map[string]string{"mif.moreh.io/role": "decode"}
	req := schedulingtest.Completion("r", "m", "x")
	req.Headers = map[string]string{"mif-prefill-endpoint": "evil:1"}
	res, err := s.Schedule(context.Background(), req, eps)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Release()
	d := decisions.Event("p", req, res)
	if d.GetPrimaryName() != "pod-1" || d.GetPrefillEndpoint() != "10.0.0.1:8000" {
		t.Errorf("primary %s prefill %s", d.GetPrimaryName(), d.GetPrefillEndpoint())
	}
	roles := []eventsv1.ProfileRole{}
	for _, p := range d.GetProfiles() {
		roles = append(roles, p.GetRole())
	}
	if len(roles) != 2 || roles[0] != eventsv1.ProfileRole_PROFILE_ROLE_PRIMARY || roles[1] != eventsv1.ProfileRole_PROFILE_ROLE_PREFILL {
		t.Errorf("roles = %v", roles)
	}
	if d.GetHeaders()["mif-prefill-endpoint"] != "10.0.0.1:8000" {
		t.Errorf("headers = %v", d.GetHeaders())
	}
	if strings.Join(d.GetRemovedHeaders(), ",") != "mif-encode-endpoints,mif-prefill-endpoint,x-gateway-destination-endpoint" {
		t.Errorf("removed headers = %v", d.GetRemovedHeaders())
	}
}

func TestDecisionFailedStage(t *testing.T) {
	s := schedulingtest.Scheduler(t, `
plugins:
- type: disagg-headers-handler
- type: always-disagg-pd-decider
- type: prefill-filter
- type: decode-filter
- type: disagg-profile-handler
  parameters: {deciders: {prefill: always-disagg-pd-decider}}
schedulingProfiles:
- {name: prefill, plugins: [{pluginRef: prefill-filter}]}
- {name: decode, plugins: [{pluginRef: decode-filter}]}
`)
	res, err := s.Schedule(context.Background(), schedulingtest.Completion("r", "m", "x"), schedulingtest.Endpoints(2))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Release()
	d := decisions.Event("p", schedulingtest.Completion("r", "m", "x"), res)
	if n := len(d.GetProfiles()); n != 2 {
		t.Fatalf("profiles = %d", n)
	}
	failed := d.GetProfiles()[1]
	if failed.GetRole() != eventsv1.ProfileRole_PROFILE_ROLE_UNUSED || !strings.Contains(failed.GetError(), "no endpoint matched: filter prefill-filter left none") || len(failed.GetEndpoints()) != 0 {
		t.Errorf("failed stage = %v", failed)
	}
	if d.GetPrefillEndpoint() != "" {
		t.Errorf("prefill endpoint of a failed stage: %s", d.GetPrefillEndpoint())
	}
}
