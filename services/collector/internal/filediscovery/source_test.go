package filediscovery

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	clientv3 "go.etcd.io/etcd/client/v3"

	registryv1 "github.com/hermod/hermod/libs/api/hermod/registry/v1"
	"github.com/hermod/hermod/libs/coord"
)

// file returns the text of an endpoints file of the given entries, each
// "name" or "name=model" (model m by default), on port 8000 of host h.
func file(entries ...string) string {
	var b strings.Builder
	b.WriteString("endpoints:\n")
	for _, e := range entries {
		name, model, ok := strings.Cut(e, "=")
		if !ok {
			model = "m"
		}
		fmt.Fprintf(&b, "  - name: %s\n    address: h:8000\n    model: %s\n", name, model)
	}
	return b.String()
}

func write(t *testing.T, path, text string) {
	t.Helper()
	// Write and rename, as editors and configuration tools do.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// desired returns the sorted names and models of s's desired state,
// name=model comma-separated.
func desired(s *Source) string {
	d := s.set.Desired()
	var out []string
	for _, name := range slices.Sorted(maps.Keys(d)) {
		out = append(out, name+"="+d[name].GetModel())
	}
	return strings.Join(out, ",")
}

// newTestSource returns a Source of the file at path that is not started:
// the test drives its polls with check.
func newTestSource(t *testing.T, path string) (*Source, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	met, err := newMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	return &Source{cfg: Config{Pool: "p", Path: path}, log: testLogger(t), met: met, set: newEntrySet()}, reg
}

func reloads(s *Source, result string) float64 {
	return testutil.ToFloat64(s.met.reloads.WithLabelValues(result))
}

// A change is applied once two polls have seen it; a bad or missing file
// changes nothing but the metrics, and is counted once.
func TestCheckFollowsTheFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "endpoints.yaml")
	write(t, path, file("a", "b"))
	s, _ := newTestSource(t, path)
	if err := s.loadFirst(); err != nil {
		t.Fatal(err)
	}
	step := func(what, want string, ok, bad, valid float64) {
		t.Helper()
		s.check()
		if got := desired(s); got != want {
			t.Fatalf("%s: desired %q, want %q", what, got, want)
		}
		if got := [3]float64{reloads(s, resultOK), reloads(s, resultError), testutil.ToFloat64(s.met.valid)}; got != [3]float64{ok, bad, valid} {
			t.Fatalf("%s: reloads ok, error and valid = %v, want %v", what, got, [3]float64{ok, bad, valid})
		}
	}
	step("unchanged", "a=m,b=m", 1, 0, 1)
	write(t, path, file("a=n", "c"))
	step("seen once", "a=m,b=m", 1, 0, 1)
	step("seen twice", "a=n,c=m", 2, 0, 1)
	if got := testutil.ToFloat64(s.met.entries); got != 2 {
		t.Fatalf("entries gauge %v", got)
	}

	write(t, path, "endpoints:\n  - name: a\n    addr: h:1\n")
	step("broken, seen once", "a=n,c=m", 2, 0, 1)
	step("broken", "a=n,c=m", 2, 1, 0)
	step("broken, again", "a=n,c=m", 2, 1, 0)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	step("removed, seen once", "a=n,c=m", 2, 1, 0)
	step("removed", "a=n,c=m", 2, 2, 0)
	write(t, path, file("a=n", "c"))
	step("restored, seen once", "a=n,c=m", 2, 2, 0)
	step("restored", "a=n,c=m", 3, 2, 1)
	write(t, path, "endpoints: []\n")
	step("emptied, seen once", "a=n,c=m", 3, 2, 1)
	step("emptied", "", 4, 2, 1)
}

// A mounted ConfigMap is a symlink to ..data/<key>, and an update swaps the
// ..data symlink to a new directory: the source sees it.
func TestCheckFollowsConfigMapSwap(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	version := func(name, text string) {
		t.Helper()
		if err := os.Mkdir(filepath.Join(dir, name), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name, "endpoints.yaml"), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		// The kubelet's atomic writer: a new ..data_tmp renamed over ..data.
		if err := os.Symlink(name, filepath.Join(dir, "..data_tmp")); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
	}
	version("..2026_01_01_00_00_00.1", file("a"))
	path := filepath.Join(dir, "endpoints.yaml")
	if err := os.Symlink(filepath.Join("..data", "endpoints.yaml"), path); err != nil {
		t.Fatal(err)
	}
	s, _ := newTestSource(t, path)
	if err := s.loadFirst(); err != nil {
		t.Fatal(err)
	}
	version("..2026_01_01_00_01_00.2", file("a", "b"))
	if err := os.RemoveAll(filepath.Join(dir, "..2026_01_01_00_00_00.1")); err != nil {
		t.Fatal(err)
	}
	s.check()
	s.check()
	if got := desired(s); got != "a=m,b=m" {
		t.Fatalf("after the swap: desired %q", got)
	}
}

// Start fails for a bad or missing file and names it.
func TestStartRejectsBadFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	write(t, bad, "endpoints:\n  - name: a\n")
	cli := clientv3.NewCtxClient(context.Background()) // never used: Start fails first
	for path, want := range map[string]string{
		bad:                             "endpoints file " + bad + ": line 2: endpoint 1 (a):",
		filepath.Join(dir, "none.yaml"): "no such file",
	} {
		reg := prometheus.NewRegistry()
		_, err := Start(context.Background(), Config{Pool: "p", Path: path, Etcd: cli, ID: "r", Registerer: reg, Logger: testLogger(t)})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want an error containing %q", path, err, want)
		}
		if mfs, _ := reg.Gather(); len(mfs) != 0 {
			t.Errorf("%s: metrics left registered", path)
		}
	}
}

// entries reads a pool's registry entries by name.
func entries(t *testing.T, cli *clientv3.Client, pool string) map[string]*registryv1.Endpoint {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, coord.EndpointsPrefix(pool), clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*registryv1.Endpoint{}
	for _, kv := range resp.Kvs {
		ep, err := coord.DecodeEndpoint(string(kv.Key), kv.Value)
		if err != nil {
			t.Fatal(err)
		}
		if kv.Lease == 0 && ep.GetLabels()["hermod.io/discovered-by"] == DiscoveredByFile {
			ep.Labels["test/permanent"] = "true"
		}
		out[ep.GetName()] = ep
	}
	return out
}

// registry returns the pool's entries as sorted name=model.
func registry(t *testing.T, cli *clientv3.Client, pool string) string {
	t.Helper()
	eps := entries(t, cli, pool)
	var out []string
	for _, name := range slices.Sorted(maps.Keys(eps)) {
		out = append(out, name+"="+eps[name].GetModel())
	}
	return strings.Join(out, ",")
}

// waitRegistry waits until the pool's entries are want (see registry).
func waitRegistry(t *testing.T, cli *clientv3.Client, pool, want string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		got := registry(t, cli, pool)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("registry holds %q, want %q", got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

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

// testConfig is the Config of the integration tests: fast polls, TTL,
// timeouts and backoff.
func testConfig(t *testing.T, cli *clientv3.Client, pool, path, id string) Config {
	return Config{
		Pool: pool, Path: path, Interval: 20 * time.Millisecond,
		Etcd: cli, ID: id, LeaseTTL: 2 * time.Second, RequestTimeout: time.Second,
		MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
		Registerer: prometheus.NewRegistry(), Logger: testLogger(t).With("replica", id),
	}
}

func start(t *testing.T, cfg Config) *Source {
	t.Helper()
	s, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func put(t *testing.T, cli *clientv3.Client, ep *registryv1.Endpoint) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := coord.PutEndpoint(ctx, cli, ep, 0); err != nil {
		t.Fatal(err)
	}
}
