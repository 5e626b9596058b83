package app

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/hermod/hermod/libs/coord"
	"github.com/hermod/hermod/services/collector/internal/inferencepool"
	"github.com/hermod/hermod/testkit/bustest"
)

// newDynamic returns a fake dynamic client serving InferencePools.
func newDynamic(objs ...runtime.Object) *dynamicfake.FakeDynamicClient {
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{inferencepool.GVR: inferencepool.ListKind}, objs...)
}

// modelsPool is an InferencePool of namespace "models" selecting app=vllm
// on port.
func modelsPool(name string, port int) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": inferencepool.Group + "/" + inferencepool.Version,
		"kind":       inferencepool.Kind,
		"metadata":   map[string]any{"name": name, "namespace": "models"},
		"spec": map[string]any{
			"selector":    map[string]any{"matchLabels": map[string]any{"app": "vllm"}},
			"targetPorts": []any{map[string]any{"number": int64(port)}},
		},
	}}
}

func TestPoolOfInferencePool(t *testing.T) {
	for _, tc := range []struct {
		name, pool, inferencePool string
		poolSet                   bool
		want, err                 string
	}{
		{name: "no inference pool", pool: "default", want: "default"},
		{name: "--pool left out", pool: "default", inferencePool: "llama", want: "llama"},
		{name: "the same --pool", pool: "llama", poolSet: true, inferencePool: "llama", want: "llama"},
		{name: "another --pool", pool: "qwen", poolSet: true, inferencePool: "llama", err: `--pool: "qwen" is not the --inference-pool "llama"`},
		{name: "--pool default given", pool: "default", poolSet: true, inferencePool: "llama", err: "--pool"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Config{PoolSet: tc.poolSet, InferencePool: tc.inferencePool}
			c.Pool = tc.pool
			err := c.poolOfInferencePool()
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one with %q", err, tc.err)
				}
				return
			}
			if err != nil || c.Pool != tc.want {
				t.Fatalf("pool %q, %v; want %q", c.Pool, err, tc.want)
			}
		})
	}
}

// A collector given only --inference-pool names its pool after it,
// registers the pods the InferencePool selects on its target port, and
// scrapes them.
func TestCollectorFollowsInferencePool(t *testing.T) {
	if testing.Short() {
		t.Skip("starts NATS and etcd servers; skipped with -short")
	}
	const pool = "collector-follows-inference-pool"
	ns := bustest.Start(t)
	eng := engine(t, 2)
	host, portText, _ := net.SplitHostPort(strings.TrimPrefix(eng.URL, "http://"))
	port, _ := strconv.Atoi(portText)

	cfg := testConfig("default", ns.ClientURL(), "c1")
	cfg.InferencePool, cfg.DiscoveryNamespace, cfg.DiscoveryTargetPort = pool, "models", 8000
	cfg.KubeClient = fake.NewClientset(modelPod("vllm-0", host, true), modelPod("vllm-1", host, false))
	cfg.DynamicClient = newDynamic(modelsPool(pool, port))
	ops := runCollector(t, cfg)

	cli := etcdSrv.Client(t)
	eventually(t, "vllm-0 registered in the InferencePool's pool and scraped", func() bool {
		eps, _, err := coord.ListEndpoints(context.Background(), cli, pool)
		return err == nil && len(eps) == 1 && eps[0].GetName() == "vllm-0" && eps[0].GetPort() == int32(port) &&
			gauge(t, ops, "hermod_collector_endpoints") == 1 && gauge(t, ops, "hermod_collector_discovery_leader") == 1
	})
}
