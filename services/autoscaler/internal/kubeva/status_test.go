package kubeva

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/wait"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/hermod/hermod/services/autoscaler/internal/config"
)

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

var t0 = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

// status is a decision's status: replicas, applied, the target resolved
// or not, at time at.
func status(replicas int32, accelerator string, targetOK bool, at time.Time) config.VariantAutoscalingStatus {
	cond := func(typ config.ConditionType, ok bool, yes, no string) config.Condition {
		c := config.Condition{Type: typ, Status: config.ConditionTrue, Reason: yes, Message: "m", LastTransitionTime: at}
		if !ok {
			c.Status, c.Reason = config.ConditionFalse, no
		}
		return c
	}
	return config.VariantAutoscalingStatus{
		DesiredOptimizedAlloc: config.OptimizedAlloc{NumReplicas: replicas, Accelerator: accelerator, LastRunTime: at},
		Actuation:             config.Actuation{Applied: targetOK},
		Conditions: []config.Condition{
			cond(config.ConditionTargetResolved, targetOK, "TargetFound", "TargetNotFound"),
			cond(config.ConditionMetricsAvailable, true, "MetricsFound", "MetricsMissing"),
			cond(config.ConditionOptimizationReady, true, "OptimizationSucceeded", "OptimizationFailed"),
		},
	}
}

// writerHarness runs a StatusWriter over a fake client.
type writerHarness struct {
	t     *testing.T
	cli   interface{ Actions() []clienttesting.Action }
	w     *StatusWriter
	clock *clock
}

func newWriter(t *testing.T, cli *fakeClient, known func(string, string) bool) *writerHarness {
	t.Helper()
	c := &clock{t: t0}
	w, err := NewStatusWriter(StatusConfig{Client: cli.FakeDynamicClient, Known: known, Refresh: time.Minute, Logger: quiet(), Now: c.now,
		Backoff: wait.Backoff{Steps: 4, Duration: time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return &writerHarness{t: t, cli: cli, w: w, clock: c}
}

// statusWrites counts the UPDATEs of /status so far.
func (h *writerHarness) statusWrites() int {
	n := 0
	for _, a := range h.cli.Actions() {
		if a.GetVerb() == "update" && a.GetSubresource() == "status" {
			n++
		}
	}
	return n
}

func (h *writerHarness) waitWrites(n int) {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for h.statusWrites() < n {
		if time.Now().After(deadline) {
			h.t.Fatalf("%d status writes, want %d", h.statusWrites(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// fakeClient is a fake dynamic client serving VariantAutoscalings.
type fakeClient struct{ *dynamicfake.FakeDynamicClient }

func newFake(objs ...runtime.Object) *fakeClient { return &fakeClient{newFakeClient(objs...)} }

// get returns the stored object.
func get(t *testing.T, cli *fakeClient, ns, name string) *unstructured.Unstructured {
	t.Helper()
	u, err := cli.Resource(GVR).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func conditions(t *testing.T, u *unstructured.Unstructured) map[string]map[string]any {
	t.Helper()
	raw, _, err := unstructured.NestedSlice(u.Object, "status", "conditions")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]any{}
	for _, c := range raw {
		m := c.(map[string]any)
		out[m["type"].(string)] = m
	}
	return out
}

// The status lands in the subresource as the CRD has it, conditions merged
// with the object's others; an unchanged status is not written again
// within the refresh period, a changed one is; a condition's
// lastTransitionTime moves only when its status changes.
func TestStatusWriterWritesTheStatus(t *testing.T) {
	foreign := func(o map[string]any) {
		o["status"] = map[string]any{"conditions": []any{map[string]any{
			"type": "Foreign", "status": "True", "reason": "Other", "message": "", "lastTransitionTime": "2025-01-01T00:00:00Z",
		}}}
	}
	cli := newFake(variant("llm", "a", foreign), variant("other", "etcd-only"))
	h := newWriter(t, cli, func(ns, name string) bool { return name != "etcd-only" })
	h.w.SetStatus("llm", "a", status(3, "A10G", true, t0))
	h.w.SetStatus("other", "etcd-only", status(3, "A10G", true, t0))
	h.w.SetStatus("", "stored", status(3, "A10G", true, t0))
	h.waitWrites(1)

	u := get(t, cli, "llm", "a")
	alloc, _, _ := unstructured.NestedMap(u.Object, "status", "desiredOptimizedAlloc")
	if alloc["numReplicas"] != int64(3) || alloc["accelerator"] != "A10G" || alloc["lastRunTime"] != "2026-03-04T05:06:07Z" {
		t.Fatalf("desiredOptimizedAlloc %v", alloc)
	}
	if applied, _, _ := unstructured.NestedBool(u.Object, "status", "actuation", "applied"); !applied {
		t.Fatal("actuation.applied is not true")
	}
	conds := conditions(t, u)
	if len(conds) != 4 || conds["Foreign"]["reason"] != "Other" {
		t.Fatalf("conditions %v; want the object's own kept", conds)
	}
	tr := conds["TargetResolved"]
	if tr["status"] != "True" || tr["reason"] != "TargetFound" || tr["message"] != "m" || tr["observedGeneration"] != int64(3) ||
		tr["lastTransitionTime"] != "2026-03-04T05:06:07Z" {
		t.Fatalf("TargetResolved %v", tr)
	}

	// The same again, later: not written within the refresh period.
	h.clock.add(10 * time.Second)
	h.w.SetStatus("llm", "a", status(3, "A10G", true, h.clock.now()))
	time.Sleep(100 * time.Millisecond)
	if n := h.statusWrites(); n != 1 {
		t.Fatalf("%d status writes of an unchanged status", n)
	}
	// A change: written; the unchanged conditions keep their transition.
	h.clock.add(10 * time.Second)
	h.w.SetStatus("llm", "a", status(4, "A10G", false, h.clock.now()))
	h.waitWrites(2)
	conds = conditions(t, get(t, cli, "llm", "a"))
	if tr := conds["TargetResolved"]; tr["status"] != "False" || tr["reason"] != "TargetNotFound" || tr["lastTransitionTime"] != "2026-03-04T05:06:27Z" {
		t.Fatalf("TargetResolved after its change %v", tr)
	}
	if ma := conds["MetricsAvailable"]; ma["lastTransitionTime"] != "2026-03-04T05:06:07Z" {
		t.Fatalf("MetricsAvailable's transition moved without a change: %v", ma)
	}
	// Unchanged, after the refresh period: written again (lastRunTime).
	h.clock.add(2 * time.Minute)
	h.w.SetStatus("llm", "a", status(4, "A10G", false, h.clock.now()))
	h.waitWrites(3)
	if n := testutil.ToFloat64(h.w.writes.WithLabelValues("ok")); n != 3 {
		t.Fatalf("ok writes %v", n)
	}
	if got := get(t, cli, "other", "etcd-only"); got.Object["status"] != nil {
		t.Fatalf("the status of an object the writer does not know was written: %v", got.Object["status"])
	}
}

// A conflict is retried with a fresh read; an object deleted in between
// is given up quietly.
func TestStatusWriterConflictsAndGone(t *testing.T) {
	cli := newFake(variant("llm", "a"))
	conflicts := 2
	var mu sync.Mutex
	cli.PrependReactor("update", Resource, func(a clienttesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		if a.GetSubresource() == "status" && conflicts > 0 {
			conflicts--
			return true, nil, apierrors.NewConflict(schema.GroupResource{Group: Group, Resource: Resource}, "a", nil)
		}
		return false, nil, nil
	})
	h := newWriter(t, cli, nil)
	h.w.SetStatus("llm", "a", status(2, "A10G", true, t0))
	h.waitWrites(3)
	deadline := time.Now().Add(10 * time.Second)
	for testutil.ToFloat64(h.w.writes.WithLabelValues("ok")) != 1 {
		if time.Now().After(deadline) {
			t.Fatal("no ok write after the conflicts")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := testutil.ToFloat64(h.w.writes.WithLabelValues("conflict")); n != 2 {
		t.Fatalf("conflicts %v", n)
	}
	if r, _, _ := unstructured.NestedInt64(get(t, cli, "llm", "a").Object, "status", "desiredOptimizedAlloc", "numReplicas"); r != 2 {
		t.Fatalf("numReplicas %d", r)
	}
	h.w.SetStatus("llm", "gone", status(2, "A10G", true, t0))
	for testutil.ToFloat64(h.w.writes.WithLabelValues("gone")) != 1 {
		if time.Now().After(deadline) {
			t.Fatal("a deleted object was not given up")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// WVA's CRD requires desiredOptimizedAlloc.accelerator: a variant without
// one keeps the object's, or, with none, gets its conditions and actuation
// written without the allocation once the API refuses it.
func TestStatusWriterWithoutAccelerator(t *testing.T) {
	cli := newFake(variant("llm", "plain"), variant("llm", "had", func(o map[string]any) {
		o["status"] = map[string]any{"desiredOptimizedAlloc": map[string]any{"numReplicas": int64(1), "accelerator": "H100"}}
	}))
	cli.PrependReactor("update", Resource, func(a clienttesting.Action) (bool, runtime.Object, error) {
		u, ok := a.(clienttesting.UpdateAction).GetObject().(*unstructured.Unstructured)
		if !ok || a.GetSubresource() != "status" {
			return false, nil, nil
		}
		alloc, has, _ := unstructured.NestedMap(u.Object, "status", "desiredOptimizedAlloc")
		if has && alloc["accelerator"] == nil {
			return true, nil, apierrors.NewInvalid(schema.GroupKind{Group: Group, Kind: "VariantAutoscaling"}, u.GetName(),
				field.ErrorList{field.Required(field.NewPath("status", "desiredOptimizedAlloc", "accelerator"), "")})
		}
		return false, nil, nil
	})
	h := newWriter(t, cli, nil)
	h.w.SetStatus("llm", "had", status(5, "", true, t0))
	h.w.SetStatus("llm", "plain", status(5, "", true, t0))
	h.waitWrites(3) // had; plain refused, then without the allocation
	deadline := time.Now().Add(10 * time.Second)
	for testutil.ToFloat64(h.w.writes.WithLabelValues("ok")) != 2 {
		if time.Now().After(deadline) {
			t.Fatal("not both written")
		}
		time.Sleep(5 * time.Millisecond)
	}
	had := get(t, cli, "llm", "had")
	if alloc, _, _ := unstructured.NestedMap(had.Object, "status", "desiredOptimizedAlloc"); alloc["accelerator"] != "H100" || alloc["numReplicas"] != int64(5) {
		t.Fatalf("had: %v", alloc)
	}
	plain := get(t, cli, "llm", "plain")
	if _, has, _ := unstructured.NestedMap(plain.Object, "status", "desiredOptimizedAlloc"); has {
		t.Fatal("plain: an allocation without accelerator")
	}
	if len(conditions(t, plain)) != 3 {
		t.Fatalf("plain: conditions %v", conditions(t, plain))
	}
}
