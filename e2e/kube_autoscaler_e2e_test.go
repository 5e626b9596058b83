package e2e

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
)

// variantAutoscalingGVR is the VariantAutoscaling's resource.
var variantAutoscalingGVR = schema.GroupVersionResource{Group: "llmd.ai", Version: "v1alpha1", Resource: "variantautoscalings"}

// The kubernetes actuator and the VariantAutoscaling status against a real
// kube-apiserver: a model server's Deployment at zero replicas and a
// VariantAutoscaling (llmd.ai/v1alpha1) whose scaleTargetRef names it, in a
// namespace with the chart's autoscaler ServiceAccount and RBAC
// (autoscaler.actuator kubernetes, variantAutoscalings.source kubernetes);
// hermod-autoscaler runs with that account's token (--actuator kubernetes
// --va-source kubernetes) on a devstack with no pods, whose gateway holds
// requests while the pool is empty. Idle, the model stays at zero (scale
// to zero is on) and the status says so; the first request waits in the
// gateway, whose queue event makes the autoscaler scale from zero: the
// Deployment's spec.replicas (read through /scale) becomes 1, and the
// VariantAutoscaling's status shows desiredOptimizedAlloc.numReplicas 1,
// actuation.applied true and the conditions. No controller-manager runs
// (nor is one needed): the actuator sets the scale subresource, which the
// API server stores in the Deployment's spec.replicas; no ReplicaSet or
// pod follows, so the Deployment reports no ready replica and the status's
// MetricsAvailable is False.
func TestKubeAutoscalerScalesDeploymentFromZero(t *testing.T) {
	srv := kube.Get(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	k := newKubeClients(t, srv.Config())
	installCRDs(ctx, t, k, crdDir)
	dir := t.TempDir()
	const pool, variant, accelerator = "kube-autoscaler", "llama-a100", "A100"
	flow := writeFile(t, dir, "flow-control.yaml", "queueing: true\nholdWhenEmpty: true\ndefaultRequestTTL: 60s\n")
	s := startStack(t, "--pods", "0", "--pool", pool, "--gateway-args", "--flow-control,"+flow)
	decisions := s.followScaling(t)
	ns := kubeNamespace(ctx, t, k, "autoscaler")

	objs := renderChart(t, ns, "global.pool="+pool, "autoscaler.actuator=kubernetes", "autoscaler.variantAutoscalings.source=kubernetes")
	kubeconfig := chartServiceAccount(ctx, t, srv, k, ns, "autoscaler", objs,
		apiCall{Namespace: ns, Verb: "update", Group: "apps", Resource: "deployments", Subresource: "scale", Name: variant},
		apiCall{Namespace: ns, Verb: "watch", Group: variantAutoscalingGVR.Group, Resource: variantAutoscalingGVR.Resource},
		apiCall{Namespace: ns, Verb: "update", Group: variantAutoscalingGVR.Group, Resource: variantAutoscalingGVR.Resource, Subresource: "status"})

	// The model server's Deployment, at zero replicas, and its variant.
	labels := map[string]string{"app": variant}
	if _, err := k.cs.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: variant},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr(int32(0)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "vllm", Image: "vllm/vllm-openai:latest"}}},
			},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	vas := k.dyn.Resource(variantAutoscalingGVR).Namespace(ns)
	va := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "llmd.ai/v1alpha1",
		"kind":       "VariantAutoscaling",
		"metadata": map[string]any{"name": variant, "namespace": ns,
			"labels": map[string]any{"inference.optimization/acceleratorName": accelerator}},
		"spec": map[string]any{
			"scaleTargetRef": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": variant},
			"modelID":        s.state.Model,
			"minReplicas":    int64(0),
			"maxReplicas":    int64(2),
			"variantCost":    "5",
		},
	}}
	if _, err := vas.Create(ctx, va, metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict}); err != nil {
		t.Fatal(err)
	}

	// Scale to zero on (a long retention, so that the replica scale from
	// zero brings stays for the test).
	cfg := writeFile(t, dir, "autoscaler.yaml", `apiVersion: v1
kind: ConfigMap
metadata:
  name: wva-model-scale-to-zero-config
data:
  default: |
    enable_scale_to_zero: true
    retention_period: "10m"
`)
	started := time.Now()
	startService(t, s, "hermod-autoscaler", "autoscaler", "autoscaler-kube", "--pool", pool,
		"--actuator", "kubernetes", "--va-source", "kubernetes", "--va-namespace", ns, "--kubeconfig", kubeconfig,
		"--config", cfg, "--interval", "100ms", "--resync", "1s")

	// Idle: the leader evaluates, holds the model at zero and writes the
	// status.
	var st vaStatus
	waitFor(t, 20*time.Second, "the VariantAutoscaling's status at zero", func() bool {
		st = readVAStatus(ctx, t, vas, variant)
		return st.written && st.numReplicas == 0 && st.applied && st.conditions["TargetResolved"] == "True/TargetFound"
	})
	idleStatus := time.Since(started)
	if n := scaleReplicas(ctx, t, k, ns, variant); n != 0 {
		t.Fatalf("idle at zero with scale to zero on, the Deployment has %d replicas", n)
	}

	// The first request waits in the gateway; its queue event brings the
	// model from zero.
	before := len(decisions.all())
	reqCtx, reqCancel := context.WithCancel(ctx)
	answered := make(chan result, 1)
	sent := time.Now()
	go func() {
		answered <- s.send(reqCtx, "/v1/completions", fmt.Sprintf(`{"model":%q,"prompt":"hello","max_tokens":4}`, s.state.Model), false)
	}()
	defer func() {
		reqCancel()
		<-answered
	}()
	var fromZero *eventsv1.ScalingDecision
	waitFor(t, 15*time.Second, "the scale-from-zero decision", func() bool {
		for _, d := range decisions.all()[before:] {
			if d.GetAnalyzer() == "scale-from-zero" {
				fromZero = d
				return true
			}
		}
		return false
	})
	decided := fromZero.GetTime().AsTime().Sub(sent)
	waitFor(t, 10*time.Second, "the Deployment's scale at 1", func() bool { return scaleReplicas(ctx, t, k, ns, variant) == 1 })
	scaled := time.Since(sent)
	waitFor(t, 10*time.Second, "the VariantAutoscaling's status at 1", func() bool {
		st = readVAStatus(ctx, t, vas, variant)
		return st.numReplicas == 1
	})
	statusAt := time.Since(sent)
	if n := scaleReplicas(ctx, t, k, ns, variant); n != st.numReplicas {
		t.Errorf("the status's desiredOptimizedAlloc.numReplicas is %d, the Deployment's /scale spec.replicas %d", st.numReplicas, n)
	}
	want := map[string]string{
		"TargetResolved":    "True/TargetFound",
		"OptimizationReady": "True/OptimizationSucceeded",
		// no controller: no pod of the Deployment becomes ready
		"MetricsAvailable": "False/MetricsMissing",
	}
	if !st.applied || st.accelerator != accelerator || !maps.Equal(st.conditions, want) {
		t.Errorf("status: applied %v, accelerator %q, conditions %v; want applied, %q, %v", st.applied, st.accelerator, st.conditions, accelerator, want)
	}
	if len(fromZero.GetVariants()) != 1 {
		t.Fatalf("the decision has %d variants: %v", len(fromZero.GetVariants()), fromZero.GetVariants())
	}
	vd := fromZero.GetVariants()[0]
	if fromZero.GetTrigger() != "scale-from-zero" || vd.GetVariant() != variant || vd.GetNamespace() != ns || vd.GetCurrent() != 0 || vd.GetDesired() != 1 || !vd.GetApplied() || vd.GetActuator() != "kubernetes" {
		t.Errorf("the decision: trigger %q, variant %v", fromZero.GetTrigger(), vd)
	}
	t.Logf("status at zero written %v after the autoscaler started; request -> scale-from-zero decision %v, -> Deployment /scale at 1 %v, -> VariantAutoscaling status at 1 %v",
		idleStatus.Round(time.Millisecond), decided.Round(time.Millisecond), scaled.Round(time.Millisecond), statusAt.Round(time.Millisecond))
}

// scaleReplicas is the Deployment's spec.replicas, read through its scale
// subresource.
func scaleReplicas(ctx context.Context, t *testing.T, k *kubeClients, ns, name string) int32 {
	t.Helper()
	sc, err := k.cs.AppsV1().Deployments(ns).GetScale(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return sc.Spec.Replicas
}

// vaStatus is what the autoscaler writes of a VariantAutoscaling's status.
type vaStatus struct {
	written     bool // desiredOptimizedAlloc is set
	numReplicas int32
	accelerator string
	applied     bool
	conditions  map[string]string // type -> status/reason
}

func readVAStatus(ctx context.Context, t *testing.T, vas dynamic.ResourceInterface, name string) vaStatus {
	t.Helper()
	o, err := vas.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var st vaStatus
	n, found, _ := unstructured.NestedInt64(o.Object, "status", "desiredOptimizedAlloc", "numReplicas")
	st.written, st.numReplicas = found, int32(n) //nolint:gosec // a replica count
	st.accelerator, _, _ = unstructured.NestedString(o.Object, "status", "desiredOptimizedAlloc", "accelerator")
	st.applied, _, _ = unstructured.NestedBool(o.Object, "status", "actuation", "applied")
	st.conditions = map[string]string{}
	conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok {
			st.conditions[fmt.Sprint(m["type"])] = fmt.Sprintf("%v/%v", m["status"], m["reason"])
		}
	}
	return st
}
