package app

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	registryv1 "github.com/hermod/hermod/libs/api/hermod/registry/v1"
	"github.com/hermod/hermod/libs/bootstrap"
	"github.com/hermod/hermod/libs/bus"
	"github.com/hermod/hermod/libs/coord"
	"github.com/hermod/hermod/testkit/bustest"
	"github.com/hermod/hermod/testkit/coordtest"
)

var etcdSrv *coordtest.Server

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run())
	}
	var err error
	if etcdSrv, err = coordtest.NewServer(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	etcdSrv.Close()
	// Every service stopped: nothing it started may still run.
	if err := goleak.Find(); code == 0 && err != nil {
		fmt.Fprintln(os.Stderr, "goroutines left behind:", err)
		code = 1
	}
	os.Exit(code)
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// engine is a fake model server exposing vLLM metrics with a waiting count
// of its own.
func engine(t *testing.T, waiting int) *httptest.Server {
	t.Helper()
	body, err := os.ReadFile("../../../../libs/enginemetrics/testdata/vllm-sim.prom")
	if err != nil {
		t.Fatal(err)
	}
	text := string(body)
	var out []string
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "vllm:num_requests_waiting{") {
			line = line[:strings.LastIndexByte(line, ' ')+1] + strconv.Itoa(waiting)
		}
		out = append(out, line)
	}
	metrics := strings.Join(out, "\n")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/metrics":
			w.Header().Set("Content-Type", "text/plain; version=0.0.4")
			_, _ = io.WriteString(w, metrics)
		case "/v1/models":
			_, _ = io.WriteString(w, `{"object":"list","data":[{"id":"llama","object":"model"},{"id":"sql-lora","object":"model","parent":"llama"}]}`)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func register(t *testing.T, pool, name, url string) {
	t.Helper()
	host, port, _ := net.SplitHostPort(strings.TrimPrefix(url, "http://"))
	p, _ := strconv.Atoi(port)
	val, err := coord.EncodeEndpoint(&registryv1.Endpoint{Name: name, Pool: pool, Address: host, Port: int32(p), Model: "llama"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := etcdSrv.Client(t).Put(context.Background(), coord.EndpointKey(pool, name), string(val)); err != nil {
		t.Fatal(err)
	}
}

func startCollector(t *testing.T, pool, natsURL, replica string) (ops string) {
	t.Helper()
	return runCollector(t, testConfig(pool, natsURL, replica))
}

// testConfig is the Config of a test collector: fast intervals and TTLs.
func testConfig(pool, natsURL, replica string) Config {
	return Config{Config: bootstrap.Config{Pool: pool, EtcdEndpoints: etcdSrv.Endpoints(), NATSURL: natsURL, Replica: replica}, MetricsListen: "127.0.0.1:0", Interval: 20 * time.Millisecond, KVInterval: 100 * time.Millisecond, MemberTTL: 2 * time.Second}
}

// runCollector runs a collector of cfg until the test ends and returns its
// ops address.
func runCollector(t *testing.T, cfg Config) (ops string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	cfg.Ready = func(a string) { ready <- a }
	go func() { done <- Run(ctx, cfg, quiet) }()
	select {
	case ops = <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("collector %s: %v", cfg.Replica, err)
	}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("collector %s: %v", cfg.Replica, err)
		}
	})
	return ops
}

// gauge reads an unlabeled gauge from a collector's /metrics.
func gauge(t *testing.T, ops, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + ops + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return -1
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestCollectorPublishesAndSplitsEndpoints(t *testing.T) {
	if testing.Short() {
		t.Skip("starts NATS and etcd servers; skipped with -short")
	}
	pool := coordtest.PoolName(t)
	ns := bustest.Start(t)
	nc, js := bustest.Connect(t, ns)
	const n = 8
	names := make([]string, n)
	for i := range n {
		names[i] = fmt.Sprintf("pod-%d", i)
		register(t, pool, names[i], engine(t, i).URL)
	}
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

	a := startCollector(t, pool, ns.ClientURL(), "c1")
	eventually(t, "metrics of every endpoint", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(latest) == n
	})
	eventually(t, "pod-5's metrics with its served models", func() bool {
		mu.Lock()
		m := latest["pod-5"]
		mu.Unlock()
		return m.GetWaitingRequests() == 5 && m.GetEngine() == "vllm" && m.GetPool() == pool && strings.Join(m.GetServedModels(), ",") == "llama,sql-lora"
	})
	eventually(t, "the latest metrics in the bucket", func() bool {
		ms, _, err := bus.LatestMetrics(context.Background(), js, pool)
		return err == nil && len(ms) == n
	})
	if got := gauge(t, a, "hermod_collector_endpoints"); got != n {
		t.Errorf("one replica scrapes %v endpoints, want %d", got, n)
	}

	// A second replica takes over part of the endpoints: together they
	// scrape each once, each those rendezvous hashing gives it.
	second := splittingReplica(t, pool, names, "c1")
	want := owned(pool, names, "c1", second)
	b := startCollector(t, pool, ns.ClientURL(), second)
	eventually(t, fmt.Sprintf("the endpoints to be split %d (c1) + %d (%s)", want["c1"], want[second], second), func() bool {
		ga, gb := gauge(t, a, "hermod_collector_endpoints"), gauge(t, b, "hermod_collector_endpoints")
		return ga == float64(want["c1"]) && gb == float64(want[second])
	})
	// A collector of another pool does not take this pool's endpoints.
	other := startCollector(t, pool+"-other", ns.ClientURL(), "other")
	time.Sleep(300 * time.Millisecond)
	if ga, gb := gauge(t, a, "hermod_collector_endpoints"), gauge(t, b, "hermod_collector_endpoints"); ga != float64(want["c1"]) || gb != float64(want[second]) || gauge(t, other, "hermod_collector_endpoints") != 0 {
		t.Errorf("after a collector of another pool joined: %v + %v, want %d + %d", ga, gb, want["c1"], want[second])
	}
}

// owned returns how many of a pool's endpoints (by name) each of replicas
// owns when they are the members: the split coord.Ownership makes.
func owned(pool string, names []string, replicas ...string) map[string]int {
	n := map[string]int{}
	for _, name := range names {
		n[coord.Owner(replicas, coord.EndpointKey(pool, name))]++
	}
	return n
}

// splittingReplica returns the id of a replica that, joining replica first
// in the pool's group, takes some but not all of the pool's endpoints from
// it. Which replica owns an endpoint depends on its key, and so on the
// pool's name, which differs between runs of a test (-count): with fixed
// ids, both replicas get some of 8 endpoints in all but 1 pool of 128 or
// so, and in that one one replica gets them all.
func splittingReplica(t *testing.T, pool string, names []string, first string) string {
	t.Helper()
	for i := 2; i < 100; i++ {
		id := fmt.Sprintf("c%d", i)
		if w := owned(pool, names, first, id); w[first] > 0 && w[id] > 0 {
			return id
		}
	}
	t.Fatalf("no replica id splits the %d endpoints of pool %s with %s", len(names), pool, first)
	return ""
}
