package app

import (
	"context"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	"github.com/hermod/hermod/libs/bootstrap"
	"github.com/hermod/hermod/libs/bus"
	"github.com/hermod/hermod/libs/coord"
	"github.com/hermod/hermod/services/collector/internal/kubediscovery"
	"github.com/hermod/hermod/testkit/bustest"
	"github.com/hermod/hermod/testkit/coordtest"
)

// modelPod is a pod of namespace "models" labelled app=vllm that runs at
// ip, Ready when ready.
func modelPod(name, ip string, ready bool) *corev1.Pod {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "models",
			Labels:      map[string]string{"app": "vllm", "hermod.io/variant": "v1"},
			Annotations: map[string]string{kubediscovery.AnnotationModel: "llama"},
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, PodIP: ip,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status}},
		},
	}
}

// A collector with Kubernetes discovery registers the Ready pod it finds,
// scrapes it and publishes its metrics; when the pod becomes unready, it
// leaves the registry and is no longer scraped.
func TestCollectorScrapesDiscoveredPods(t *testing.T) {
	if testing.Short() {
		t.Skip("starts NATS and etcd servers; skipped with -short")
	}
	pool := coordtest.PoolName(t)
	ns := bustest.Start(t)
	nc, _ := bustest.Connect(t, ns)
	eng := engine(t, 3)
	host, portText, _ := net.SplitHostPort(strings.TrimPrefix(eng.URL, "http://"))
	port, _ := strconv.Atoi(portText)
	kube := fake.NewClientset(modelPod("vllm-0", host, true), modelPod("vllm-1", host, false))

	var mu sync.Mutex
	latest := map[string]*eventsv1.PodMetrics{}
	filter, _ := bus.MetricsFilter(pool)
	sub, err := bus.Subscribe(nc, filter, func(m *eventsv1.PodMetrics, _ string) {
		mu.Lock()
		latest[m.GetEndpoint()] = m
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Close() }()

	cfg := testConfig(pool, ns.ClientURL(), "c1")
	cfg.Discovery, cfg.KubeClient = DiscoveryKubernetes, kube
	cfg.DiscoveryNamespace, cfg.DiscoverySelector, cfg.DiscoveryTargetPort = "models", "app=vllm", port
	ops := runCollector(t, cfg)

	eventually(t, "vllm-0's metrics with its served models", func() bool {
		mu.Lock()
		m := latest["vllm-0"]
		mu.Unlock()
		return m.GetWaitingRequests() == 3 && strings.Join(m.GetServedModels(), ",") == "llama,sql-lora"
	})
	cli := etcdSrv.Client(t)
	eps, _, err := coord.ListEndpoints(context.Background(), cli, pool)
	if err != nil {
		t.Fatal(err)
	}
	if len(eps) != 1 || eps[0].GetName() != "vllm-0" || eps[0].GetModel() != "llama" ||
		eps[0].GetLabels()["hermod.io/variant"] != "v1" || eps[0].GetLabels()[kubediscovery.LabelDiscoveredBy] != "kubernetes" {
		t.Fatalf("registry: %v", eps)
	}
	for name, want := range map[string]float64{
		"hermod_collector_discovery_leader": 1, "hermod_collector_discovery_endpoints": 1, "hermod_collector_endpoints": 1,
		"hermod_collector_discovery_sync_errors_total": 0,
	} {
		if got := gauge(t, ops, name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	mu.Lock()
	_, scrapedUnready := latest["vllm-1"]
	mu.Unlock()
	if scrapedUnready {
		t.Error("the unready pod was scraped")
	}

	if _, err := kube.CoreV1().Pods("models").Update(context.Background(), modelPod("vllm-0", host, false), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the unready pod to leave the registry and the scraper", func() bool {
		eps, _, err := coord.ListEndpoints(context.Background(), cli, pool)
		return err == nil && len(eps) == 0 && gauge(t, ops, "hermod_collector_endpoints") == 0 &&
			gauge(t, ops, "hermod_collector_discovery_endpoints") == 0
	})
}

func TestDiscoveryFlagErrors(t *testing.T) {
	kube := fake.NewClientset()
	dyn := newDynamic()
	valid := Config{Config: bootstrap.Config{Pool: "p", Replica: "r"}, MemberTTL: time.Second, Discovery: DiscoveryKubernetes, KubeClient: kube,
		DynamicClient: dyn, DiscoveryNamespace: "models", DiscoverySelector: "app=vllm", DiscoveryTargetPort: 8000}
	for _, tc := range []struct {
		name   string
		change func(*Config)
		want   []string // substrings of the error; none: valid
	}{
		{"valid", func(*Config) {}, nil},
		{"off", func(c *Config) { *c = Config{Discovery: DiscoveryNone, DiscoverySelector: "((("} }, nil},
		{"off by default", func(c *Config) { *c = Config{} }, nil},
		{"unknown source", func(c *Config) { c.Discovery = "consul" }, []string{`--discovery: "consul"`}},
		{"no selector", func(c *Config) { c.DiscoverySelector = "" }, []string{"--discovery-selector: empty"}},
		{"bad selector", func(c *Config) { c.DiscoverySelector = "app in (" }, []string{"--discovery-selector: label selector"}},
		{"bad port", func(c *Config) { c.DiscoveryTargetPort = 70000 }, []string{"--discovery-target-port: 70000"}},
		{"bad resync", func(c *Config) { c.DiscoveryResync = -time.Second }, []string{"--discovery-resync: -1s"}},
		{"bad namespace", func(c *Config) { c.DiscoveryNamespace = "Models" }, []string{`--discovery-namespace: "Models"`}},
		{"no namespace", func(c *Config) { c.DiscoveryNamespace = "" }, []string{"--discovery-namespace: not set"}},
		{"several", func(c *Config) { c.DiscoverySelector, c.DiscoveryTargetPort = "", 0 },
			[]string{"--discovery-selector", "--discovery-target-port"}},
		{"missing kubeconfig", func(c *Config) { c.KubeClient, c.Kubeconfig = nil, "/does/not/exist" }, []string{"--kubeconfig: ", "/does/not/exist"}},
		{"inference pool", func(c *Config) { c.InferencePool, c.DiscoverySelector = "llama", "" }, nil},
		{"inference pool turns discovery on", func(c *Config) { c.Discovery, c.InferencePool, c.DiscoverySelector = DiscoveryNone, "llama", "" }, nil},
		{"inference pool and a selector", func(c *Config) { c.InferencePool = "llama" }, []string{"--discovery-selector: \"app=vllm\" given with an InferencePool"}},
		{"invalid inference pool", func(c *Config) { c.InferencePool, c.DiscoverySelector = "Llama", "" }, []string{`--inference-pool: "Llama"`}},
		{"inference pool without a dynamic client", func(c *Config) {
			c.InferencePool, c.DiscoverySelector, c.DynamicClient, c.Kubeconfig = "llama", "", nil, "/does/not/exist"
		}, []string{"--kubeconfig: "}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := valid
			tc.change(&c)
			dc, err := c.discovery()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				if c.Discovery == DiscoveryKubernetes && (dc == nil || dc.Kube != kube || dc.ID != "r" || dc.LeaseTTL != time.Second) {
					t.Fatalf("config %+v", dc)
				}
				if c.InferencePool != "" && (dc == nil || dc.InferencePool != c.InferencePool || dc.Dynamic != dyn || dc.TargetPort != 0 || dc.Selector != "") {
					t.Fatalf("config %+v", dc)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error; want one with %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}
