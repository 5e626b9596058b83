package app

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	"github.com/hermod/hermod/libs/bootstrap"
	"github.com/hermod/hermod/libs/bus"
	"github.com/hermod/hermod/services/autoscaler/internal/kubeva"
	"github.com/hermod/hermod/services/autoscaler/internal/store"
	"github.com/hermod/hermod/testkit/bustest"
	"github.com/hermod/hermod/testkit/coordtest"
)

func TestConfigValidateVASource(t *testing.T) {
	base := Config{Config: bootstrap.Config{Pool: "p", EtcdEndpoints: []string{"e"}, NATSURL: "n"}, Actuator: "metrics", LeaseTTL: time.Second}
	for _, tc := range []struct {
		name   string
		change func(*Config)
		want   string // substring of the error; "": valid
	}{
		{"default", func(*Config) {}, ""},
		{"kubernetes, every namespace, a selector", func(c *Config) {
			c.VASource, c.VANamespace, c.VASelector = VASourceKubernetes, AllNamespaces, "hermod.io/pool=p"
		}, ""},
		{"both", func(c *Config) { c.VASource, c.VANamespace = VASourceBoth, "llm" }, ""},
		{"unknown source", func(c *Config) { c.VASource = "crd" }, `--va-source: "crd"`},
		{"bad selector", func(c *Config) { c.VASource, c.VASelector = VASourceKubernetes, "a in (" }, "--va-selector"},
		{"bad namespace", func(c *Config) { c.VASource, c.VANamespace = VASourceKubernetes, "LLM" }, `--va-namespace: "LLM"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := base
			tc.change(&c)
			err := c.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate() = %v, want one with %q", err, tc.want)
			}
		})
	}
}

// apiVariant is a VariantAutoscaling of the API in namespace llm that can
// scale to zero, for the local actuator.
func apiVariant(name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": kubeva.Group + "/" + kubeva.Version,
		"kind":       "VariantAutoscaling",
		"metadata": map[string]any{"name": name, "namespace": "llm",
			"labels": map[string]any{"inference.optimization/acceleratorName": "L4"}},
		"spec": map[string]any{
			"scaleTargetRef": map[string]any{"kind": "DevstackFleet", "name": name},
			"modelID":        "m-api", "minReplicas": int64(0), "maxReplicas": int64(2),
		},
	}}
}

// With --va-source kubernetes the service takes its variants from the API
// (none from etcd), decides on them (scale from zero on a queue event) and
// writes each decision into the object's status subresource.
func TestKubernetesVariantsGetTheirStatus(t *testing.T) {
	cli, _ := coordtest.Start(t)
	srv := bustest.Start(t)
	nc, js := bustest.Connect(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := bus.EnsureStreams(ctx, js, bus.DefaultLimits()); err != nil {
		t.Fatal(err)
	}
	pool := coordtest.PoolName(t)
	// A stored variant, ignored with --va-source kubernetes.
	if _, err := cli.Put(ctx, store.VariantKey(pool, "stored"), vaYAML("llm", "stored", "1")); err != nil {
		t.Fatal(err)
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{kubeva.GVR: kubeva.ListKind}, apiVariant("api-l4"))

	rctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(rctx, Config{Config: bootstrap.Config{Pool: pool, Replica: "as-0", EtcdEndpoints: cli.Endpoints(), NATSURL: srv.ClientURL()},
			MetricsListen: "127.0.0.1:0", Actuator: "local", LeaseTTL: 2 * time.Second, Interval: 50 * time.Millisecond, Resync: 200 * time.Millisecond,
			VASource: VASourceKubernetes, VANamespace: "llm", DynamicClient: dyn},
			slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	vas := dyn.Resource(kubeva.GVR).Namespace("llm")
	status := func() (replicas int64, accelerator string, conds int) {
		u, err := vas.Get(ctx, "api-l4", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		replicas, _, _ = unstructured.NestedInt64(u.Object, "status", "desiredOptimizedAlloc", "numReplicas")
		accelerator, _, _ = unstructured.NestedString(u.Object, "status", "desiredOptimizedAlloc", "accelerator")
		c, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		return replicas, accelerator, len(c)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, acc, n := status(); acc == "L4" && n == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no status written for the held variant")
		}
		time.Sleep(20 * time.Millisecond)
	}
	subject, _ := bus.FlowControlSubject(pool, "gw-0")
	for {
		if err := bus.PublishCore(nc, subject, &eventsv1.FlowControlQueue{Pool: pool, Replica: "gw-0",
			Queued: map[string]int64{"m-api": 1}, Time: timestamppb.Now()}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
		if r, _, _ := status(); r == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the scale-from-zero decision did not reach the status")
		}
	}
	if _, err := store.Get(ctx, cli, store.ReplicasKey(pool, "stored")); err == nil {
		t.Error("the stored variant was scaled with --va-source kubernetes")
	}
	data, err := store.Get(ctx, cli, store.ReplicasKey(pool, "api-l4"))
	if err != nil || string(data) != "1" {
		t.Fatalf("replica target of api-l4 = %q, %v; want 1", data, err)
	}
}
