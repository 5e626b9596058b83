package topology_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	_ "github.com/hermod/hermod/libs/plugins/standard" // the other plugin types
	"github.com/hermod/hermod/libs/plugins/topology"
	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/libs/scheduling/schedulingtest"
)

func TestCompare(t *testing.T) {
	a := topology.Topology{Hostname: "h1", Rack: "r1", Zone: "z1", Region: "eu"}
	for _, tc := range []struct {
		b    topology.Topology
		want topology.Level
	}{
		{topology.Topology{Hostname: "h1"}, topology.Host},
		{topology.Topology{Hostname: "h2", Rack: "r1", Zone: "z1"}, topology.Rack},
		{topology.Topology{Hostname: "h2", Rack: "r2", Zone: "z1", Region: "eu"}, topology.Zone},
		{topology.Topology{Region: "eu"}, topology.Region},
		{topology.Topology{Region: "us"}, topology.None},
	} {
		if got := topology.Compare(a, tc.b); got != tc.want {
			t.Errorf("%+v vs %+v: %v, want %v", a, tc.b, got, tc.want)
		}
	}
	if got := topology.Compare(topology.Topology{Zone: "z"}, topology.Topology{Hostname: "", Zone: "z"}); got != topology.Zone {
		t.Errorf("an unknown host is no match, the zone is: %v", got)
	}
}

// pod is an endpoint of role on host (in rack, zone z1).
func pod(name, role, host, rack string, i int) *scheduling.Endpoint {
	return schedulingtest.Endpoint(name, map[string]string{"llm-d.ai/role": role, "kubernetes.io/hostname": host,
		"topology.kubernetes.io/rack": rack, "topology.kubernetes.io/zone": "z1"}, &scheduling.Metrics{WaitingRequests: i})
}

const pdTopology = `
plugins:
- type: topology-extractor
- type: topology-affinity-filter
  parameters: {minAffinity: %s}
- type: topology-affinity-scorer
- type: always-disagg-pd-decider
- type: prefill-filter
- type: decode-filter
- type: queue-scorer
- type: max-score-picker
- type: disagg-profile-handler
  parameters: {deciders: {prefill: always-disagg-pd-decider}}
schedulingProfiles:
- name: prefill
  plugins:
  - pluginRef: prefill-filter
  - pluginRef: topology-affinity-filter
  - {pluginRef: queue-scorer, weight: 1}
  - {pluginRef: topology-affinity-scorer, weight: %s}
  - pluginRef: max-score-picker
- name: decode
  plugins:
  - pluginRef: decode-filter
  - pluginRef: max-score-picker
`

// The prefill pick lands near the decode pod: on its host when one is
// free of the filter's floor, else in its rack; a filter that would keep
// nobody keeps everybody.
func TestPrefillPlacedNearTheDecodePod(t *testing.T) {
	decode := pod("decode-0", "decode", "h1", "r1", 0)
	sameHost := pod("prefill-h1", "prefill", "h1", "r1", 4) // busier than the others
	sameRack := pod("prefill-h2", "prefill", "h2", "r1", 2)
	far := pod("prefill-h9", "prefill", "h9", "r9", 0) // the idlest
	target := func(minAffinity, weight string, eps ...*scheduling.Endpoint) string {
		t.Helper()
		s := schedulingtest.Scheduler(t, fmt.Sprintf(pdTopology, minAffinity, weight))
		res, err := s.Schedule(context.Background(), schedulingtest.Chat("r", "m", "hello"), eps)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Release()
		if res.Prefill == nil {
			t.Fatal("no prefill stage")
		}
		tg, _ := res.Prefill.Target()
		return tg.Endpoint.Name
	}
	if got := target("host", "0", decode, sameHost, sameRack, far); got != "prefill-h1" {
		t.Errorf("minAffinity host: prefill on %s, want prefill-h1", got)
	}
	if got := target("rack", "0", decode, sameHost, sameRack, far); got != "prefill-h2" {
		t.Errorf("minAffinity rack, by queue: prefill on %s, want prefill-h2 (idler of the rack)", got)
	}
	if got := target("host", "0", decode, sameRack, far); got != "prefill-h9" {
		t.Errorf("no prefill pod on the host: fail open, the idlest (%s), want prefill-h9", got)
	}
	// the scorer: same host 1 against same zone 0.05 outweighs the queue
	if got := target("region", "10", decode, sameHost, sameRack, far); got != "prefill-h1" {
		t.Errorf("scored by proximity: prefill on %s, want prefill-h1", got)
	}
}

func TestParameterErrors(t *testing.T) {
	h := schedulingtest.NewHandle()
	if _, err := schedulingtest.NewErr(h, topology.FilterType, "f", `{"minAffinity": "planet"}`); err == nil || !strings.Contains(err.Error(), "minAffinity") {
		t.Errorf("minAffinity planet: %v", err)
	}
	if _, err := schedulingtest.NewErr(h, topology.ScorerType, "s", `{"topologyProducerName": "nope"}`); err == nil || !strings.Contains(err.Error(), "topologyProducerName") {
		t.Errorf("an undeclared producer: %v", err)
	}
}
