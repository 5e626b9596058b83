package service

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	registryv1 "github.com/hermod/hermod/libs/api/hermod/registry/v1"
)

// decisionCounts reads hermod_picker_routing_decisions_total by
// profile/target.
func decisionCounts(t *testing.T, g prometheus.Gatherer) map[string]float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != DecisionsMetric {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			out[l["profile"]+"/"+l["target"]] = m.GetCounter().GetValue()
		}
	}
	return out
}

func TestRoutingDecisionsMetric(t *testing.T) {
	reg := prometheus.NewRegistry()
	f := newFixtureWith(t, func(o *Options) { o.Metrics = NewMetrics(reg, "pool", o.Endpoints) },
		ep("pod-a", "10.0.0.1"), ep("pod-b", "10.0.0.2"))
	ctx := context.Background()
	for _, target := range []string{"10.0.0.1:8000", "10.0.0.1:8000", "10.0.0.2:8000"} {
		in := pick(`{"model": "llama", "prompt": "hi"}`)
		in.Subset = []string{target}
		if _, err := f.client.Pick(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	if got := decisionCounts(t, reg); len(got) != 2 || got["default/pod-a"] != 2 || got["default/pod-b"] != 1 {
		t.Fatalf("decisions %v, want default/pod-a 2 and default/pod-b 1", got)
	}
	// a failed Pick is no decision
	if _, err := f.client.Pick(ctx, pick(`{"model": "gpt-9", "prompt": "hi"}`)); err == nil {
		t.Fatal("a Pick for an unknown model succeeded")
	}
	// pod-b leaves the registry: its series goes at the next scrape
	f.set.SetRegistry(2, map[string]*registryv1.Endpoint{"pod-a": ep("pod-a", "10.0.0.1")})
	if got := decisionCounts(t, reg); len(got) != 1 || got["default/pod-a"] != 2 {
		t.Fatalf("after pod-b left: %v", got)
	}
	if got := decisionCounts(t, reg); len(got) != 1 {
		t.Fatalf("second scrape: %v", got)
	}
}
