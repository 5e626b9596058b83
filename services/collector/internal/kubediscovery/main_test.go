package kubediscovery

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	registryv1 "github.com/hermod/hermod/libs/api/hermod/registry/v1"
	"github.com/hermod/hermod/libs/coord"
	"github.com/hermod/hermod/testkit/coordtest"
)

// srv is the etcd server the integration tests share, started by the first
// of them; each test uses a pool of its own (coordtest.PoolName).
var (
	srv     *coordtest.Server
	srvErr  error
	srvOnce sync.Once
)

// suite runs the tests inside goleak's check and stops the shared server
// before it, so that the check also proves that every Source, informer,
// client and server stopped.
type suite struct{ m *testing.M }

func (s suite) Run() int {
	code := s.m.Run()
	if srv != nil {
		srv.Close()
	}
	return code
}

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(suite{m})
}

// integration skips the test under -short and returns a client of the shared
// server, closed when the test ends.
func integration(t *testing.T) *clientv3.Client {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: needs an embedded etcd server (skipped with -short)")
	}
	srvOnce.Do(func() { srv, srvErr = coordtest.NewServer() })
	if srvErr != nil {
		t.Fatal(srvErr)
	}
	return srv.Client(t)
}

const testNS = "models"

// readyAt is the Ready condition's transition time of the test pods.
var readyAt = metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))

// pod returns a Running pod of testNS labelled app=vllm, Ready when ready,
// with IP ip (none when empty), changed by mods.
func pod(name, ip string, ready bool, mods ...func(*corev1.Pod)) *corev1.Pod {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS, Labels: map[string]string{"app": "vllm"}},
		Status: corev1.PodStatus{
			Phase:      corev1.PodRunning,
			PodIP:      ip,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status, LastTransitionTime: readyAt}},
		},
	}
	for _, m := range mods {
		m(p)
	}
	return p
}

// testLogger returns a logger into the test's log that stops writing when
// the test ends (goroutines may log while they stop).
func testLogger(t *testing.T) *slog.Logger {
	t.Helper()
	w := &testWriter{t: t}
	t.Cleanup(w.stop)
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct {
	mu   sync.Mutex
	t    *testing.T
	done bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimSuffix(string(p), "\n"))
	}
	return len(p), nil
}

func (w *testWriter) stop() {
	w.mu.Lock()
	w.done = true
	w.mu.Unlock()
}

// testConfig is the Config of the tests: fast TTL, timeouts and backoff.
func testConfig(t *testing.T, cli *clientv3.Client, kube *fake.Clientset, pool, id string) Config {
	return Config{
		Pool: pool, Namespace: testNS, Selector: "app=vllm", TargetPort: 8000,
		Kube: kube, Etcd: cli, ID: id,
		LeaseTTL: 2 * time.Second, RequestTimeout: time.Second,
		MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
		Registerer: prometheus.NewRegistry(),
		Logger:     testLogger(t).With("replica", id),
	}
}

// start starts a Source of cfg, closed when the test ends.
func start(t *testing.T, cfg Config) *Source {
	t.Helper()
	s, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// entry is a registry entry as stored.
type entry struct {
	ep     *registryv1.Endpoint
	lease  int64
	modRev int64
	raw    string
}

// entries reads a pool's registry entries by name; a value that does not
// decode has a nil ep.
func entries(t *testing.T, cli *clientv3.Client, pool string) map[string]entry {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, coord.EndpointsPrefix(pool), clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]entry{}
	for _, kv := range resp.Kvs {
		name := strings.TrimPrefix(string(kv.Key), coord.EndpointsPrefix(pool))
		ep, _ := coord.DecodeEndpoint(string(kv.Key), kv.Value)
		out[name] = entry{ep: ep, lease: kv.Lease, modRev: kv.ModRevision, raw: string(kv.Value)}
	}
	return out
}

// eventually waits up to 15s for cond.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// names returns the sorted names of m joined by commas.
func names(m map[string]entry) string {
	return strings.Join(slices.Sorted(maps.Keys(m)), ",")
}

// waitNames waits until the pool's entries are exactly want (sorted, comma
// separated) and returns them.
func waitNames(t *testing.T, cli *clientv3.Client, pool, want string) map[string]entry {
	t.Helper()
	var got map[string]entry
	deadline := time.Now().Add(15 * time.Second)
	for {
		got = entries(t, cli, pool)
		if names(got) == want {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("registry holds %q, want %q", names(got), want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// gathered returns the value of an unlabelled metric of reg (-1 when
// absent).
func gathered(t *testing.T, reg prometheus.Gatherer, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name || len(mf.GetMetric()) == 0 {
			continue
		}
		m := mf.GetMetric()[0]
		switch {
		case m.GetGauge() != nil:
			return m.GetGauge().GetValue()
		case m.GetCounter() != nil:
			return m.GetCounter().GetValue()
		}
	}
	return -1
}
