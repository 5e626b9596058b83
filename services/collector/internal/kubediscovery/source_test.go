package kubediscovery

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	registryv1 "github.com/hermod/hermod/libs/api/hermod/registry/v1"
	"github.com/hermod/hermod/libs/coord"
	"github.com/hermod/hermod/testkit/coordtest"
)

// pods is the test's view of the fake cluster's pods.
type pods struct {
	t    *testing.T
	kube *fake.Clientset
}

func (p pods) create(pd *corev1.Pod) {
	p.t.Helper()
	if _, err := p.kube.CoreV1().Pods(pd.Namespace).Create(context.Background(), pd, metav1.CreateOptions{}); err != nil {
		p.t.Fatal(err)
	}
}

func (p pods) update(pd *corev1.Pod) {
	p.t.Helper()
	if _, err := p.kube.CoreV1().Pods(pd.Namespace).Update(context.Background(), pd, metav1.UpdateOptions{}); err != nil {
		p.t.Fatal(err)
	}
}

func (p pods) delete(name string) {
	p.t.Helper()
	if err := p.kube.CoreV1().Pods(testNS).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		p.t.Fatal(err)
	}
}

// waitLeading waits until s leads.
func waitLeading(t *testing.T, s *Source) {
	t.Helper()
	eventually(t, "the source to lead", s.Leading)
}

// The registry follows the pods: ready ones with an IP are registered at
// start and when they become ready; unready, deleted, terminating and
// unselected ones are removed; pods of other namespaces and other labels
// never appear. The metrics follow.
func TestRegistryFollowsPods(t *testing.T) {
	t.Parallel()
	cli := integration(t)
	pool := coordtest.PoolName(t)
	kube := fake.NewClientset(
		pod("ready", "10.0.0.1", true),
		pod("unready", "10.0.0.2", false),
		pod("no-ip", "", true),
		pod("other-app", "10.0.0.3", true, label("app", "web")),
		pod("other-ns", "10.0.0.4", true, func(p *corev1.Pod) { p.Namespace = "elsewhere" }),
	)
	k := pods{t, kube}
	cfg := testConfig(t, cli, kube, pool, "r1")
	s := start(t, cfg)
	reg := cfg.Registerer.(*prometheus.Registry)

	got := waitNames(t, cli, pool, "ready")
	waitLeading(t, s)
	if e := got["ready"]; e.lease == 0 || !proto.Equal(e.ep, want("ready", "10.0.0.1", 8000, func(ep *registryv1.Endpoint) { ep.Pool = pool })) {
		t.Fatalf("entry of pod ready: %v (lease %x)", e.ep, e.lease)
	}
	eventually(t, "the metrics", func() bool {
		return gathered(t, reg, "hermod_collector_discovery_leader") == 1 && gathered(t, reg, "hermod_collector_discovery_endpoints") == 1
	})

	// Becoming ready, getting an IP, and a new pod with annotations.
	k.update(pod("unready", "10.0.0.2", true))
	k.update(pod("no-ip", "10.0.0.5", true))
	k.create(pod("annotated", "10.0.0.6", true, label("hermod.io/variant", "v2"), label("llm-d.ai/role", "decode"), annotate(
		AnnotationModel, "llama", AnnotationServedModels, "llama,sql-lora",
		AnnotationKVEventsPort, "5557", AnnotationKVReplayPort, "5558", AnnotationKVEventsTopic, "kv@${POD_IP}@${MODEL}")))
	k.create(pod("ranks", "10.0.0.7", true, annotate(AnnotationDataParallelSize, "2")))
	got = waitNames(t, cli, pool, "annotated,no-ip,ranks-rank0,ranks-rank1,ready,unready")
	wantAnnotated := want("annotated", "10.0.0.6", 8000, func(ep *registryv1.Endpoint) {
		ep.Pool = pool
		ep.Labels["hermod.io/variant"], ep.Labels["llm-d.ai/role"] = "v2", "decode"
		ep.Model, ep.ServedModels = "llama", []string{"llama", "sql-lora"}
		ep.KvEventsEndpoint, ep.KvReplayEndpoint, ep.KvEventsTopic = "tcp://10.0.0.6:5557", "tcp://10.0.0.6:5558", "kv@10.0.0.6@llama"
	})
	if !proto.Equal(got["annotated"].ep, wantAnnotated) {
		t.Fatalf("annotated pod's entry:\n got %v\nwant %v", got["annotated"].ep, wantAnnotated)
	}
	if r1 := got["ranks-rank1"].ep; r1.GetPort() != 8001 || r1.GetDataParallelRank() != 1 {
		t.Fatalf("rank 1: %v", r1)
	}
	if got["no-ip"].ep.GetAddress() != "10.0.0.5" {
		t.Fatalf("no-ip's entry: %v", got["no-ip"].ep)
	}

	// An annotation change is written.
	k.update(pod("ready", "10.0.0.1", true, annotate(AnnotationModel, "qwen")))
	eventually(t, "the new model", func() bool { return entries(t, cli, pool)["ready"].ep.GetModel() == "qwen" })

	// Becoming unready, being deleted, terminating, leaving the selection.
	k.update(pod("unready", "10.0.0.2", false))
	k.delete("no-ip")
	k.update(pod("ranks", "10.0.0.7", true, annotate(AnnotationDataParallelSize, "2"), func(p *corev1.Pod) {
		now := metav1.Now()
		p.DeletionTimestamp = &now
	}))
	k.update(pod("annotated", "10.0.0.6", true, label("app", "web")))
	waitNames(t, cli, pool, "ready")
	eventually(t, "the endpoints gauge", func() bool { return gathered(t, reg, "hermod_collector_discovery_endpoints") == 1 })
	if n := gathered(t, reg, "hermod_collector_discovery_sync_errors_total"); n != 0 {
		t.Errorf("%v sync errors without a failure", n)
	}

	// Close resigns: the metrics say so, and the entries stay for the next
	// leader (or until the lease expires).
	s.Close()
	if got := gathered(t, reg, "hermod_collector_discovery_leader"); got != -1 {
		t.Errorf("metrics still registered after Close: leader = %v", got)
	}
	if _, err := coord.Leader(context.Background(), cli, ServicePrefix+pool); err == nil {
		t.Error("a leader after Close")
	}
	waitNames(t, cli, pool, "ready")
}

// At start the leader deletes the entries it owns that no pod stands for,
// rewrites the ones that differ, and leaves alone every entry it does not
// own: registered by a pod itself (also under a discovered pod's name) or
// malformed. Later it never deletes or overwrites a pod's own entry either.
func TestStartRemovesStaleOwnedEntriesOnly(t *testing.T) {
	t.Parallel()
	cli := integration(t)
	pool := coordtest.PoolName(t)
	ctx := context.Background()
	put := func(name string, ep *registryv1.Endpoint) {
		t.Helper()
		v, err := coord.EncodeEndpoint(ep)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cli.Put(ctx, coord.EndpointKey(pool, name), string(v)); err != nil {
			t.Fatal(err)
		}
	}
	discovered := map[string]string{LabelDiscoveredBy: DiscoveredByKubernetes}
	put("gone", &registryv1.Endpoint{Name: "gone", Pool: pool, Address: "10.9.9.9", Port: 8000, Labels: discovered})
	put("moved", &registryv1.Endpoint{Name: "moved", Pool: pool, Address: "10.9.9.8", Port: 8000, Labels: discovered})
	put("self", &registryv1.Endpoint{Name: "self", Pool: pool, Address: "10.0.1.1", Port: 8000})
	put("taken", &registryv1.Endpoint{Name: "taken", Pool: pool, Address: "10.0.1.2", Port: 9000, Labels: map[string]string{"app": "vllm"}})
	if _, err := cli.Put(ctx, coord.EndpointKey(pool, "junk"), "not json"); err != nil {
		t.Fatal(err)
	}
	before := entries(t, cli, pool)

	kube := fake.NewClientset(pod("moved", "10.0.0.1", true), pod("taken", "10.0.0.2", true), pod("new", "10.0.0.3", true))
	k := pods{t, kube}
	s := start(t, testConfig(t, cli, kube, pool, "r1"))
	got := waitNames(t, cli, pool, "junk,moved,new,self,taken")
	waitLeading(t, s)
	if got["moved"].ep.GetAddress() != "10.0.0.1" || got["moved"].lease == 0 {
		t.Errorf("moved: %v (lease %x), want the pod's address under the leader's lease", got["moved"].ep, got["moved"].lease)
	}
	for _, name := range []string{"self", "taken", "junk"} {
		if got[name].modRev != before[name].modRev {
			t.Errorf("%s was written (mod revision %d -> %d): %s", name, before[name].modRev, got[name].modRev, got[name].raw)
		}
	}

	// A pod registers itself under the name of a discovered pod: the entry
	// is its own from then on, and stays when the pod becomes unready or is
	// deleted.
	self := &registryv1.Endpoint{Name: "new", Pool: pool, Address: "10.0.0.3", Port: 8000, Model: "own"}
	put("new", self)
	selfRev := entries(t, cli, pool)["new"].modRev
	k.update(pod("new", "10.0.0.3", false))
	k.delete("taken")
	k.delete("moved")
	got = waitNames(t, cli, pool, "junk,new,self,taken")
	// The removal of moved came after the pods' changes: new's is done.
	if got["new"].modRev != selfRev || got["taken"].modRev != before["taken"].modRev {
		t.Fatalf("a pod's own entry was written: new %d -> %d, taken %d -> %d",
			selfRev, got["new"].modRev, before["taken"].modRev, got["taken"].modRev)
	}
}

// When the leader closes, the other replica takes over and rewrites every
// entry under its own lease, so the entries outlive the former leader's
// lease; it then follows the pods.
func TestLeaderFailover(t *testing.T) {
	t.Parallel()
	cli := integration(t)
	pool := coordtest.PoolName(t)
	kube := fake.NewClientset(pod("a", "10.0.0.1", true), pod("b", "10.0.0.2", true))
	k := pods{t, kube}
	first := start(t, testConfig(t, cli, kube, pool, "first"))
	waitLeading(t, first)
	got := waitNames(t, cli, pool, "a,b")
	firstLease := got["a"].lease
	second := start(t, testConfig(t, cli, kube, pool, "second"))
	eventually(t, "the second source to list the pods", second.Synced)
	time.Sleep(200 * time.Millisecond)
	if second.Leading() {
		t.Fatal("two leaders")
	}

	first.Close()
	waitLeading(t, second)
	eventually(t, "the entries under the second leader's lease", func() bool {
		es := entries(t, cli, pool)
		return names(es) == "a,b" && es["a"].lease != firstLease && es["a"].lease == es["b"].lease && es["a"].lease != 0
	})
	// The first leader's lease expires (it is not kept alive); the
	// entries stay.
	eventually(t, "the first leader's lease to expire", func() bool {
		ttl, err := cli.TimeToLive(context.Background(), clientv3.LeaseID(firstLease))
		return err == nil && ttl.TTL == -1
	})
	waitNames(t, cli, pool, "a,b")

	k.create(pod("c", "10.0.0.3", true))
	k.delete("a")
	waitNames(t, cli, pool, "b,c")
	if l, err := coord.Leader(context.Background(), cli, ServicePrefix+pool); err != nil || l != "second" {
		t.Fatalf("leader %q, %v", l, err)
	}
}

// When the leader dies (its etcd client is gone, so it keeps no lease
// alive), the other replica is elected once the leader's lease expires and
// writes the entries again.
func TestLeaderDies(t *testing.T) {
	t.Parallel()
	cli := integration(t)
	pool := coordtest.PoolName(t)
	kube := fake.NewClientset(pod("a", "10.0.0.1", true), pod("b", "10.0.0.2", true))
	k := pods{t, kube}
	doomed, err := srv.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	first := start(t, testConfig(t, doomed, kube, pool, "first"))
	waitLeading(t, first)
	firstLease := waitNames(t, cli, pool, "a,b")["a"].lease
	second := start(t, testConfig(t, cli, kube, pool, "second"))
	eventually(t, "the second source to list the pods", second.Synced)

	died := time.Now()
	_ = doomed.Close()
	waitLeading(t, second)
	t.Logf("second leader elected %s after the first died", time.Since(died).Round(time.Millisecond))
	eventually(t, "the entries under the second leader's lease", func() bool {
		es := entries(t, cli, pool)
		return names(es) == "a,b" && es["a"].lease != firstLease && es["b"].lease != firstLease
	})
	k.delete("b")
	waitNames(t, cli, pool, "a")

	closing := time.Now()
	first.Close()
	if d := time.Since(closing); d > 3*time.Second {
		t.Errorf("Close of a source whose client is closed took %s", d)
	}
}

// etcd unreachable for longer than the TTL, then back: the leader steps
// down, the informer keeps following the pods, the failed writes are
// counted, and the registry converges once etcd is back.
func TestEtcdOutage(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("integration test: needs an embedded etcd server (skipped with -short)")
	}
	own, err := coordtest.NewServer()
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	cli := own.Client(t)
	pool := coordtest.PoolName(t)
	kube := fake.NewClientset(pod("a", "10.0.0.1", true), pod("b", "10.0.0.2", true))
	k := pods{t, kube}
	cfg := testConfig(t, cli, kube, pool, "r1")
	reg := cfg.Registerer.(*prometheus.Registry)
	s := start(t, cfg)
	waitLeading(t, s)
	waitNames(t, cli, pool, "a,b")

	// etcd refuses new requests as soon as it begins to stop; Stop itself
	// may wait for open streams, for longer than the TTL. The pods change
	// meanwhile, while the source still leads.
	stopping := time.Now()
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		own.Stop()
	}()
	time.Sleep(50 * time.Millisecond)
	k.create(pod("c", "10.0.0.3", true))
	k.update(pod("a", "10.0.0.1", false))
	eventually(t, "a failed sync", func() bool { return gathered(t, reg, "hermod_collector_discovery_sync_errors_total") > 0 })
	eventually(t, "the leader to step down", func() bool { return !s.Leading() })
	<-stopped
	t.Logf("etcd stopped in %s", time.Since(stopping).Round(time.Millisecond))
	if wait := 2*cfg.LeaseTTL - time.Since(stopping); wait > 0 {
		time.Sleep(wait)
	}
	k.create(pod("d", "10.0.0.4", true))

	if err := own.Restart(); err != nil {
		t.Fatal(err)
	}
	waitLeading(t, s)
	got := waitNames(t, cli, pool, "b,c,d")
	if got["b"].lease != got["c"].lease || got["b"].lease != got["d"].lease {
		t.Errorf("entries under different leases after the outage: %x %x %x", got["b"].lease, got["c"].lease, got["d"].lease)
	}
	eventually(t, "the leader gauge", func() bool { return gathered(t, reg, "hermod_collector_discovery_leader") == 1 })
}

// A resync rewrites an entry someone deleted and removes an owned entry
// someone added.
func TestResyncRepairsTheRegistry(t *testing.T) {
	t.Parallel()
	cli := integration(t)
	pool := coordtest.PoolName(t)
	kube := fake.NewClientset(pod("a", "10.0.0.1", true))
	cfg := testConfig(t, cli, kube, pool, "r1")
	cfg.Resync = 300 * time.Millisecond
	s := start(t, cfg)
	waitLeading(t, s)
	waitNames(t, cli, pool, "a")
	ctx := context.Background()
	if _, err := cli.Delete(ctx, coord.EndpointKey(pool, "a")); err != nil {
		t.Fatal(err)
	}
	v, err := coord.EncodeEndpoint(&registryv1.Endpoint{Name: "stray", Pool: pool, Labels: map[string]string{LabelDiscoveredBy: DiscoveredByKubernetes}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, coord.EndpointKey(pool, "stray"), string(v)); err != nil {
		t.Fatal(err)
	}
	waitNames(t, cli, pool, "a")
}
