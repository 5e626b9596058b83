package app

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	"github.com/hermod/hermod/libs/bus"
	"github.com/hermod/hermod/libs/coord"
	"github.com/hermod/hermod/testkit/bustest"
	"github.com/hermod/hermod/testkit/coordtest"
)

// A collector with an endpoints file registers its endpoints, scrapes them
// and publishes their metrics like any other; an endpoint removed from the
// file leaves the registry and the scraper.
func TestCollectorScrapesFileEndpoints(t *testing.T) {
	if testing.Short() {
		t.Skip("starts NATS and etcd servers; skipped with -short")
	}
	pool := coordtest.PoolName(t)
	ns := bustest.Start(t)
	nc, _ := bustest.Connect(t, ns)
	eng := engine(t, 5)
	addr := strings.TrimPrefix(eng.URL, "http://")

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

	path := filepath.Join(t.TempDir(), "endpoints.yaml")
	entry := "  - name: %s\n    address: %s\n    model: llama\n    labels: {hermod.io/variant: vm}\n"
	if err := os.WriteFile(path, fmt.Appendf(nil, "endpoints:\n"+entry+entry, "vm-0", addr, "vm-1", addr), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(pool, ns.ClientURL(), "c1")
	cfg.EndpointsFile, cfg.EndpointsFileInterval = path, 20*time.Millisecond
	ops := runCollector(t, cfg)

	eventually(t, "both endpoints' metrics", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return latest["vm-0"].GetWaitingRequests() == 5 && latest["vm-1"].GetWaitingRequests() == 5
	})
	cli := etcdSrv.Client(t)
	eps, _, err := coord.ListEndpoints(context.Background(), cli, pool)
	if err != nil {
		t.Fatal(err)
	}
	if len(eps) != 2 || eps[0].GetLabels()["hermod.io/variant"] != "vm" || eps[0].GetLabels()["hermod.io/discovered-by"] != "file" {
		t.Fatalf("registry: %v", eps)
	}
	for name, want := range map[string]float64{
		"hermod_collector_endpoints_file_leader": 1, "hermod_collector_endpoints_file_registered": 2, "hermod_collector_endpoints": 2,
	} {
		if got := gauge(t, ops, name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}

	if err := os.WriteFile(path, fmt.Appendf(nil, "endpoints:\n"+entry, "vm-0", addr), 0o600); err != nil {
		t.Fatal(err)
	}
	eventually(t, "vm-1 to leave the registry and the scraper", func() bool {
		eps, _, err := coord.ListEndpoints(context.Background(), cli, pool)
		return err == nil && len(eps) == 1 && gauge(t, ops, "hermod_collector_endpoints") == 1
	})
}

// A bad endpoints file stops the collector at start, naming the flag and
// the line.
func TestCollectorRejectsBadEndpointsFile(t *testing.T) {
	if testing.Short() {
		t.Skip("starts NATS and etcd servers; skipped with -short")
	}
	ns := bustest.Start(t)
	path := filepath.Join(t.TempDir(), "endpoints.yaml")
	if err := os.WriteFile(path, []byte("endpoints:\n  - name: a\n    address: h:1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(coordtest.PoolName(t), ns.ClientURL(), "c1")
	cfg.EndpointsFile = path
	err := Run(t.Context(), cfg, quiet)
	if err == nil || !strings.Contains(err.Error(), "--endpoints-file: endpoints file "+path+": line 2: endpoint 1 (a): model: required") {
		t.Fatalf("got %v", err)
	}
}

// fileConfig is a pool config whose dataLayer.discovery names the
// endpoints file path with a file-discovery (upstream's layout).
func fileConfig(path string, watch bool) string {
	return fmt.Sprintf(`plugins:
- name: file-disc
  type: file-discovery
  parameters:
    path: %q
    watchFile: %v
- type: queue-scorer
dataLayer:
  discovery:
    pluginRef: file-disc
`, path, watch)
}

// routerEntries is an endpoints file in the llm-d router's form listing
// names at addr (host:port).
func routerEntries(t *testing.T, addr string, names ...string) []byte {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("endpoints:\n")
	for _, name := range names {
		fmt.Fprintf(&b, "  - name: %s\n    address: %q\n    port: %q\n    labels:\n      job: slurm-42\n", name, host, port)
	}
	return []byte(b.String())
}

func putConfig(t *testing.T, pool, data string) {
	t.Helper()
	if _, err := coord.PutConfig(context.Background(), etcdSrv.Client(t), pool, []byte(data)); err != nil {
		t.Fatal(err)
	}
}

// registryNames returns the sorted names of the pool's registry entries.
func registryNames(t *testing.T, pool string) string {
	t.Helper()
	eps, _, err := coord.ListEndpoints(context.Background(), etcdSrv.Client(t), pool)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, ep := range eps {
		names = append(names, ep.GetName())
	}
	slices.Sort(names)
	return strings.Join(names, ",")
}

// Without --endpoints-file, a collector follows the endpoints file the
// pool's config names with a file-discovery (in the llm-d router's file
// form): its endpoints are registered, scraped and published; an endpoint
// removed from the file leaves; a config naming another file brings that
// file's endpoints instead, and one naming none lets them go.
func TestCollectorFollowsConfigEndpointsFile(t *testing.T) {
	if testing.Short() {
		t.Skip("starts NATS and etcd servers; skipped with -short")
	}
	pool := coordtest.PoolName(t)
	ns := bustest.Start(t)
	nc, _ := bustest.Connect(t, ns)
	addr := strings.TrimPrefix(engine(t, 7).URL, "http://")

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

	dir := t.TempDir()
	first, second := filepath.Join(dir, "endpoints.yaml"), filepath.Join(dir, "other.yaml")
	if err := os.WriteFile(first, routerEntries(t, addr, "vllm-0", "vllm-1"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(second, routerEntries(t, addr, "vllm-2"), 0o600); err != nil {
		t.Fatal(err)
	}
	putConfig(t, pool, fileConfig(first, true))
	cfg := testConfig(pool, ns.ClientURL(), "c1")
	cfg.EndpointsFileInterval = 20 * time.Millisecond
	ops := runCollector(t, cfg)

	eventually(t, "both endpoints' metrics and served models", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, name := range []string{"vllm-0", "vllm-1"} {
			if m := latest[name]; m.GetWaitingRequests() != 7 || !slices.Equal(m.GetServedModels(), []string{"llama", "sql-lora"}) {
				return false
			}
		}
		return true
	})
	eps, _, err := coord.ListEndpoints(context.Background(), etcdSrv.Client(t), pool)
	if err != nil {
		t.Fatal(err)
	}
	if len(eps) != 2 || eps[0].GetLabels()["job"] != "slurm-42" || eps[0].GetLabels()["hermod.io/discovered-by"] != "file" || eps[0].GetModel() != "" {
		t.Fatalf("registry: %v", eps)
	}
	if got := gauge(t, ops, "hermod_collector_endpoints_file_registered"); got != 2 {
		t.Errorf("hermod_collector_endpoints_file_registered = %v, want 2", got)
	}

	// watchFile: true, so the edit is followed
	if err := os.WriteFile(first, routerEntries(t, addr, "vllm-0"), 0o600); err != nil {
		t.Fatal(err)
	}
	eventually(t, "vllm-1 to leave the registry and the scraper", func() bool {
		return registryNames(t, pool) == "vllm-0" && gauge(t, ops, "hermod_collector_endpoints") == 1
	})

	putConfig(t, pool, fileConfig(second, true))
	eventually(t, "the other file's endpoint instead", func() bool { return registryNames(t, pool) == "vllm-2" })

	// another scorer, the same file: nothing changes
	putConfig(t, pool, strings.Replace(fileConfig(second, true), "queue-scorer", "kv-cache-utilization-scorer", 1))
	time.Sleep(200 * time.Millisecond)
	if got := registryNames(t, pool); got != "vllm-2" {
		t.Fatalf("registry %q after a config change that keeps the file", got)
	}

	putConfig(t, pool, "plugins: [{type: queue-scorer}]\n")
	eventually(t, "the file's endpoint to expire", func() bool {
		return registryNames(t, pool) == "" && gauge(t, ops, "hermod_collector_endpoints_file_registered") == -1
	})
}

// With watchFile false (upstream's default) the file is read when the
// collector starts following it, and an edit is not followed.
func TestCollectorReadsConfigEndpointsFileOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("starts NATS and etcd servers; skipped with -short")
	}
	pool := coordtest.PoolName(t)
	ns := bustest.Start(t)
	addr := strings.TrimPrefix(engine(t, 1).URL, "http://")
	path := filepath.Join(t.TempDir(), "endpoints.yaml")
	if err := os.WriteFile(path, routerEntries(t, addr, "vllm-0"), 0o600); err != nil {
		t.Fatal(err)
	}
	putConfig(t, pool, fileConfig(path, false))
	cfg := testConfig(pool, ns.ClientURL(), "c1")
	cfg.EndpointsFileInterval = 20 * time.Millisecond
	runCollector(t, cfg)
	eventually(t, "the endpoint", func() bool { return registryNames(t, pool) == "vllm-0" })

	if err := os.WriteFile(path, routerEntries(t, addr, "vllm-0", "vllm-1"), 0o600); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if got := registryNames(t, pool); got != "vllm-0" {
		t.Fatalf("registry %q: the edit was followed", got)
	}
	// watchFile turned on: the file is followed anew, and read again
	putConfig(t, pool, fileConfig(path, true))
	eventually(t, "the edit", func() bool { return registryNames(t, pool) == "vllm-0,vllm-1" })
}

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// --endpoints-file wins over the file the pool's config names, with a
// warning naming both.
func TestCollectorEndpointsFileFlagWins(t *testing.T) {
	if testing.Short() {
		t.Skip("starts NATS and etcd servers; skipped with -short")
	}
	pool := coordtest.PoolName(t)
	ns := bustest.Start(t)
	addr := strings.TrimPrefix(engine(t, 1).URL, "http://")
	dir := t.TempDir()
	flagFile, configFile := filepath.Join(dir, "flag.yaml"), filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(flagFile, routerEntries(t, addr, "from-flag"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(configFile, routerEntries(t, addr, "from-config"), 0o600); err != nil {
		t.Fatal(err)
	}
	putConfig(t, pool, fileConfig(configFile, true))

	var logs syncBuffer
	cfg := testConfig(pool, ns.ClientURL(), "c1")
	cfg.EndpointsFile, cfg.EndpointsFileInterval = flagFile, 20*time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	cfg.Ready = func(a string) { ready <- a }
	go func() { done <- Run(ctx, cfg, slog.New(slog.NewTextHandler(&logs, nil))) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("collector: %v", err)
	}
	eventually(t, "the flag's endpoint", func() bool { return registryNames(t, pool) == "from-flag" })
	time.Sleep(200 * time.Millisecond)
	if got := registryNames(t, pool); got != "from-flag" {
		t.Fatalf("registry %q, want the flag's endpoint alone", got)
	}
	if l := logs.String(); !strings.Contains(l, "level=WARN") || !strings.Contains(l, "config_endpoints_file="+configFile) ||
		!strings.Contains(l, "endpoints_file="+flagFile) {
		t.Errorf("no warning naming both files in\n%s", l)
	}
}

// A bad file the pool's config names stops the collector at start, naming
// the plugin, the file and the line.
func TestCollectorRejectsBadConfigEndpointsFile(t *testing.T) {
	if testing.Short() {
		t.Skip("starts NATS and etcd servers; skipped with -short")
	}
	pool := coordtest.PoolName(t)
	ns := bustest.Start(t)
	path := filepath.Join(t.TempDir(), "endpoints.yaml")
	if err := os.WriteFile(path, []byte("endpoints:\n  - name: a\n    address: \"::1\"\n    port: \"8000\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	putConfig(t, pool, fileConfig(path, true))
	err := Run(t.Context(), testConfig(pool, ns.ClientURL(), "c1"), quiet)
	if err == nil || !strings.Contains(err.Error(), `dataLayer.discovery.pluginRef "file-disc": endpoints file `+path+`: line 2: endpoint 1 (a): address: "::1" is not an IPv4 address`) {
		t.Fatalf("got %v", err)
	}
}

// fakeFiles records what configFiles starts and closes.
type fakeFiles struct {
	mu     sync.Mutex
	bad    map[string]bool
	events []string
}

func (f *fakeFiles) check(path string, _ bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.bad[path] {
		return errors.New("bad file " + path)
	}
	return nil
}

func (f *fakeFiles) start(spec fileSpec) (fileSource, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	name := spec.path
	if spec.once {
		name += " once"
	}
	f.events = append(f.events, "start "+name)
	return closeFunc(func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.events = append(f.events, "close "+name)
	}), nil
}

func (f *fakeFiles) take() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := strings.Join(f.events, "; ")
	f.events = nil
	return out
}

type closeFunc func()

func (c closeFunc) Close() { c() }

// configFiles follows what the config names: another file once it is
// valid (the one in force kept until then), none when it names none, and
// nothing at all when the flag names a file.
func TestConfigFilesFollowTheConfig(t *testing.T) {
	fake := &fakeFiles{bad: map[string]bool{}}
	f := newConfigFiles("", fake.check, fake.start, quiet)
	step := func(what string, spec *fileSpec, wantErr bool, want string) {
		t.Helper()
		if spec != nil {
			f.set(*spec, 1)
		}
		if err := f.sync(); (err != nil) != wantErr {
			t.Fatalf("%s: sync error %v", what, err)
		}
		if got := fake.take(); got != want {
			t.Fatalf("%s: %q, want %q", what, got, want)
		}
	}
	a, b, bOnce := fileSpec{path: "a", plugin: "p"}, fileSpec{path: "b", plugin: "p"}, fileSpec{path: "b", once: true, plugin: "p"}
	step("no discovery", &fileSpec{}, false, "")
	step("a", &a, false, "start a")
	step("a again", &a, false, "")
	fake.bad["b"] = true
	step("b, not valid yet: a stays", &b, true, "")
	step("b, still not valid", nil, true, "")
	fake.bad["b"] = false
	step("b, valid now", nil, false, "close a; start b")
	step("b read once", &bOnce, false, "close b; start b once")
	step("none", &fileSpec{}, false, "close b once")
	step("a once more", &a, false, "start a")
	f.close()
	if got := fake.take(); got != "close a" {
		t.Fatalf("close: %q", got)
	}
	step("after close", &b, false, "")

	// the flag wins: the config's file is never started
	var logs syncBuffer
	g := newConfigFiles("flag.yaml", fake.check, fake.start, slog.New(slog.NewTextHandler(&logs, nil)))
	g.set(a, 3)
	g.set(fileSpec{path: "flag.yaml"}, 4)
	if err := g.sync(); err != nil || fake.take() != "" {
		t.Fatalf("with the flag: %v", err)
	}
	if l := logs.String(); strings.Count(l, "level=WARN") != 1 || !strings.Contains(l, "config_endpoints_file=a") || !strings.Contains(l, "revision=3") {
		t.Errorf("want one warning for the other file, got\n%s", l)
	}
}

// run retries a file that is not valid yet every interval, and logs its
// error once.
func TestConfigFilesRunRetries(t *testing.T) {
	fake := &fakeFiles{bad: map[string]bool{"a": true}}
	var logs syncBuffer
	f := newConfigFiles("", fake.check, fake.start, slog.New(slog.NewTextHandler(&logs, nil)))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.run(ctx, 5*time.Millisecond)
	}()
	f.set(fileSpec{path: "a", plugin: "p"}, 1)
	time.Sleep(50 * time.Millisecond)
	fake.mu.Lock()
	fake.bad["a"] = false
	fake.mu.Unlock()
	eventually(t, "the file to be taken", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.cur.path == "a"
	})
	cancel()
	<-done
	f.close()
	if got := fake.take(); got != "start a; close a" {
		t.Errorf("events %q", got)
	}
	if l := logs.String(); strings.Count(l, "level=ERROR") != 1 || !strings.Contains(l, "bad file a") {
		t.Errorf("want the error logged once, got\n%s", l)
	}
}
