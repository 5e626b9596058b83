package engine

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	registryv1 "github.com/hermod/hermod/libs/api/hermod/registry/v1"
	"github.com/hermod/hermod/services/autoscaler/internal/actuator/local"
	"github.com/hermod/hermod/services/autoscaler/internal/config"
	"github.com/hermod/hermod/services/autoscaler/internal/observe"
	"github.com/hermod/hermod/services/autoscaler/internal/store"
	"github.com/hermod/hermod/testkit/coordtest"
)

// sink records the statuses handed to a StatusSink.
type sink struct {
	mu   sync.Mutex
	last map[string]Status
	n    int
}

func (s *sink) SetStatus(namespace, name string, st Status) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last == nil {
		s.last = map[string]Status{}
	}
	s.last[namespace+"/"+name] = st
	s.n++
}

func (s *sink) get(key string) (Status, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last[key], s.n
}

func conditionOf(st Status, typ config.ConditionType) config.Condition {
	for _, c := range st.Conditions {
		if c.Type == typ {
			return c
		}
	}
	return config.Condition{}
}

// The status sink gets every variant's status after each evaluation: a
// held model's (nothing changed: its replicas, applied) as well as a
// decision's, with the variant's accelerator and WVA's condition reasons.
func TestStatusSinkAfterEachEvaluation(t *testing.T) {
	cli, _ := coordtest.Start(t)
	pool := coordtest.PoolName(t)
	if _, err := cli.Put(context.Background(), store.ReplicasKey(pool, "cheap"), "1"); err != nil {
		t.Fatal(err)
	}
	set := mustSet(t, `apiVersion: llmd.ai/v1alpha1
kind: VariantAutoscaling
metadata: {name: cheap, namespace: llm, labels: {inference.optimization/acceleratorName: A10G}}
spec: {scaleTargetRef: {kind: DevstackFleet, name: cheap}, modelID: m, minReplicas: 1, maxReplicas: 4}
`)
	s := &sink{}
	rec := newRecorder()
	e, err := New(Options{Pool: pool, Replica: "a", Client: cli, Actuator: local.New(cli, pool), Publish: rec.publish, Status: s,
		LeaseTTL: 2 * time.Second, Interval: 50 * time.Millisecond, Resync: 200 * time.Millisecond, Log: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	e.SetConfig(set)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Error(err)
		}
	}()

	// Held: one replica set, none serving yet (pending): no change.
	waitFor(t, 10*time.Second, "a held status", func() bool { _, n := s.get("llm/cheap"); return n > 0 })
	st, _ := s.get("llm/cheap")
	if st.DesiredOptimizedAlloc.NumReplicas != 1 || st.DesiredOptimizedAlloc.Accelerator != "A10G" || !st.Actuation.Applied ||
		st.DesiredOptimizedAlloc.LastRunTime.IsZero() {
		t.Fatalf("held status %+v", st)
	}
	if c := conditionOf(st, config.ConditionMetricsAvailable); c.Status != config.ConditionFalse || c.Reason != ReasonMetricsMissing {
		t.Fatalf("MetricsAvailable of a variant with no ready replica: %+v", c)
	}
	if c := conditionOf(st, config.ConditionOptimizationReady); c.Status != config.ConditionTrue || c.Reason != ReasonOptimizationSucceeded {
		t.Fatalf("OptimizationReady %+v", c)
	}

	// Saturated: a decision to 2, its status handed over too.
	e.OnEndpoints([]*registryv1.Endpoint{{Name: "cheap-0", Model: "m", Labels: map[string]string{observe.VariantLabel: "cheap"}}})
	e.OnMetrics(&eventsv1.PodMetrics{Endpoint: "cheap-0", WaitingRequests: 7, KvCacheUsage: 0.5, Time: timestamppb.Now()})
	if d := rec.next(t, 5*time.Second); d.GetVariants()[0].GetDesired() != 2 {
		t.Fatalf("decision %v", d)
	}
	waitFor(t, 5*time.Second, "the decision's status", func() bool {
		st, _ := s.get("llm/cheap")
		return st.DesiredOptimizedAlloc.NumReplicas == 2
	})
	st, _ = s.get("llm/cheap")
	if c := conditionOf(st, config.ConditionTargetResolved); c.Status != config.ConditionTrue || c.Reason != ReasonTargetFound {
		t.Fatalf("TargetResolved %+v", c)
	}
	if c := conditionOf(st, config.ConditionMetricsAvailable); c.Status != config.ConditionTrue || c.Reason != ReasonMetricsFound {
		t.Fatalf("MetricsAvailable with a ready replica: %+v", c)
	}
}
