package kubediscovery

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"

	registryv1 "github.com/hermod/hermod/libs/api/hermod/registry/v1"
	"github.com/hermod/hermod/libs/coord"
	"github.com/hermod/hermod/services/collector/internal/inferencepool"
	"github.com/hermod/hermod/testkit/coordtest"
)

// inferencePool returns an InferencePool of testNS selecting app=<app> on
// ports.
func inferencePool(name, app string, ports ...int64) *unstructured.Unstructured {
	tps := make([]any, len(ports))
	for i, p := range ports {
		tps[i] = map[string]any{"number": p}
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": inferencepool.Group + "/" + inferencepool.Version,
		"kind":       inferencepool.Kind,
		"metadata":   map[string]any{"name": name, "namespace": testNS},
		"spec": map[string]any{
			"selector":          map[string]any{"matchLabels": map[string]any{"app": app}},
			"targetPorts":       tps,
			"endpointPickerRef": map[string]any{"name": "hermod-picker", "port": map[string]any{"number": int64(9002)}},
		},
	}}
}

func newDynamic(objs ...runtime.Object) *dynamicfake.FakeDynamicClient {
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{inferencepool.GVR: inferencepool.ListKind}, objs...)
}

// With an InferencePool, the registry follows the pool's selector and
// target ports as they change: nothing (and no stale owned entry) while
// the pool is absent, one endpoint per pod and port (the active ones) once
// it has several ports, the pods of a new selector at once, none after the
// pool is deleted. Pod events keep applying under the current pool. (The
// collector names its pool after the InferencePool; Source does not
// require it.)
func TestRegistryFollowsInferencePool(t *testing.T) {
	t.Parallel()
	cli := integration(t)
	pool := coordtest.PoolName(t)
	ctx := context.Background()
	stale, err := coord.EncodeEndpoint(&registryv1.Endpoint{Name: "stale", Pool: pool, Address: "10.9.9.9", Port: 8000,
		Labels: map[string]string{LabelDiscoveredBy: DiscoveredByKubernetes}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, coord.EndpointKey(pool, "stale"), string(stale)); err != nil {
		t.Fatal(err)
	}
	kube := fake.NewClientset(
		pod("a", "10.0.0.1", true),
		pod("b", "10.0.0.2", true, label("app", "sglang")),
		pod("c", "10.0.0.3", true, annotate(inferencepool.AnnotationActivePorts, "8001")),
	)
	k := pods{t, kube}
	dyn := newDynamic()
	pools := dyn.Resource(inferencepool.GVR).Namespace(testNS)
	cfg := testConfig(t, cli, kube, pool, "r1")
	cfg.Selector, cfg.TargetPort, cfg.InferencePool, cfg.Dynamic = "", 0, "llama", dyn
	s := start(t, cfg)
	waitLeading(t, s)
	eventually(t, "the source to sync", s.Synced)
	waitNames(t, cli, pool, "")

	if _, err := pools.Create(ctx, inferencePool("llama", "vllm", 8000), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// c serves inference on 8001 only: not a target port yet.
	got := waitNames(t, cli, pool, "a")
	if ep := got["a"].ep; ep.GetPort() != 8000 || ep.GetPool() != pool || got["a"].lease == 0 {
		t.Fatalf("a: %v", ep)
	}

	update := func(u *unstructured.Unstructured) {
		t.Helper()
		if _, err := pools.Update(ctx, u, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	update(inferencePool("llama", "vllm", 8000, 8001))
	got = waitNames(t, cli, pool, "a-rank0,a-rank1,c-rank1")
	if ep := got["c-rank1"].ep; ep.GetPort() != 8001 || ep.GetDataParallelRank() != 1 || ep.GetAddress() != "10.0.0.3" {
		t.Fatalf("c-rank1: %v", ep)
	}

	update(inferencePool("llama", "sglang", 30000))
	waitNames(t, cli, pool, "b")
	k.create(pod("d", "10.0.0.4", true, label("app", "sglang")))
	k.update(pod("a", "10.0.0.1", true, label("app", "sglang")))
	waitNames(t, cli, pool, "a,b,d")
	if got := entries(t, cli, pool)["d"].ep; got.GetPort() != 30000 {
		t.Fatalf("d: %v", got)
	}

	if err := pools.Delete(ctx, "llama", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitNames(t, cli, pool, "")
}
