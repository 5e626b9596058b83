package filediscovery

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	registryv1 "github.com/hermod/hermod/libs/api/hermod/registry/v1"
	"github.com/hermod/hermod/testkit/coordtest"
)

// The registry follows the file: its entries are registered under the
// leader's lease; an edit is written; a broken file removes nothing; a
// removed entry is deregistered. Entries the file does not own are left
// alone, a stale one it owns is removed, and every entry goes one TTL after
// the collector stops.
func TestRegistryFollowsFile(t *testing.T) {
	t.Parallel()
	cli := integration(t)
	pool := coordtest.PoolName(t)
	// A pod's own entry holding a name of the file, one of Kubernetes
	// discovery, and a stale one of the file's from a previous leader.
	put(t, cli, &registryv1.Endpoint{Name: "own", Pool: pool, Address: "x", Port: 1, Model: "pod"})
	put(t, cli, &registryv1.Endpoint{Name: "kube", Pool: pool, Address: "x", Port: 1, Model: "k8s", Labels: map[string]string{"hermod.io/discovered-by": "kubernetes"}})
	put(t, cli, &registryv1.Endpoint{Name: "stale", Pool: pool, Address: "x", Port: 1, Model: "old", Labels: map[string]string{"hermod.io/discovered-by": DiscoveredByFile}})

	path := filepath.Join(t.TempDir(), "endpoints.yaml")
	write(t, path, file("a", "b", "own=file"))
	cfg := testConfig(t, cli, pool, path, "r1")
	s := start(t, cfg)
	reg := cfg.Registerer.(*prometheus.Registry)

	waitRegistry(t, cli, pool, "a=m,b=m,kube=k8s,own=pod")
	eventually(t, "the source to lead", s.Leading)
	got := entries(t, cli, pool)
	if a := got["a"]; a.GetLabels()["hermod.io/discovered-by"] != DiscoveredByFile || a.GetLabels()["test/permanent"] != "" ||
		a.GetAddress() != "h" || a.GetPort() != 8000 || a.GetRegisteredAt() == nil {
		t.Fatalf("entry a: %v", a)
	}
	for name, want := range map[string]float64{
		"hermod_collector_endpoints_file_entries": 3, "hermod_collector_endpoints_file_registered": 2,
		"hermod_collector_endpoints_file_leader": 1, "hermod_collector_endpoints_file_valid": 1,
	} {
		eventually(t, name, func() bool { return gathered(t, reg, name) == want })
	}

	// An edit: a changes, c comes.
	write(t, path, file("a=n", "b", "c", "own=file"))
	waitRegistry(t, cli, pool, "a=n,b=m,c=m,kube=k8s,own=pod")

	// A broken file removes nothing.
	write(t, path, file("a=n")+"  - name: b\n    address: [\n")
	eventually(t, "the rejection", func() bool { return testutil.ToFloat64(s.met.reloads.WithLabelValues(resultError)) == 1 })
	time.Sleep(5 * cfg.Interval)
	if got := registry(t, cli, pool); got != "a=n,b=m,c=m,kube=k8s,own=pod" {
		t.Fatalf("after a broken file the registry holds %q", got)
	}
	if gathered(t, reg, "hermod_collector_endpoints_file_valid") != 0 {
		t.Error("the valid gauge stays 1 for a broken file")
	}

	// An entry deleted from the file goes.
	write(t, path, file("a=n", "c", "own=file"))
	waitRegistry(t, cli, pool, "a=n,c=m,kube=k8s,own=pod")
	if n := gathered(t, reg, "hermod_collector_endpoints_file_sync_errors_total"); n != 0 {
		t.Errorf("%v sync errors without a failure", n)
	}

	// Stopped, the collector's entries expire with its lease.
	s.Close()
	if gathered(t, reg, "hermod_collector_endpoints_file_leader") != -1 {
		t.Error("metrics still registered after Close")
	}
	waitRegistry(t, cli, pool, "kube=k8s,own=pod")
}

// Of two replicas one writes; when it stops, the other takes over and the
// entries stay.
func TestOneWriterFailover(t *testing.T) {
	t.Parallel()
	cli := integration(t)
	pool := coordtest.PoolName(t)
	path := filepath.Join(t.TempDir(), "endpoints.yaml")
	write(t, path, file("a", "b"))
	s1 := start(t, testConfig(t, cli, pool, path, "r1"))
	eventually(t, "r1 to lead", s1.Leading)
	s2 := start(t, testConfig(t, cli, pool, path, "r2"))
	waitRegistry(t, cli, pool, "a=m,b=m")
	time.Sleep(200 * time.Millisecond)
	if s2.Leading() {
		t.Fatal("two leaders")
	}
	s1.Close()
	eventually(t, "r2 to lead", s2.Leading)
	write(t, path, file("a", "c"))
	waitRegistry(t, cli, pool, "a=m,c=m")
	// Beyond the TTL of r1's lease, the entries are r2's.
	time.Sleep(3 * time.Second)
	waitRegistry(t, cli, pool, "a=m,c=m")
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

// With Once (file-discovery's watchFile: false) the file is read at Start
// and not again: an edit waits for the next Start.
func TestOnceReadsTheFileOnce(t *testing.T) {
	t.Parallel()
	cli := integration(t)
	pool := coordtest.PoolName(t)
	path := filepath.Join(t.TempDir(), "endpoints.yaml")
	write(t, path, file("a"))
	cfg := testConfig(t, cli, pool, path, "r1")
	cfg.Once = true
	s := start(t, cfg)
	waitRegistry(t, cli, pool, "a=m")

	write(t, path, file("a=n", "b"))
	time.Sleep(10 * cfg.Interval)
	if got := registry(t, cli, pool); got != "a=m" || desired(s) != "a=m" {
		t.Fatalf("after an edit: registry %q, desired %q; want the file as it was read", got, desired(s))
	}
	if n := testutil.ToFloat64(s.met.reloads.WithLabelValues(resultOK)); n != 1 {
		t.Errorf("%v loads, want 1", n)
	}
	s.Close()

	// the next Start reads the edit
	cfg.Registerer = prometheus.NewRegistry()
	start(t, cfg)
	waitRegistry(t, cli, pool, "a=n,b=m")
}

// Check takes what Start takes and names the file in what it refuses.
func TestCheck(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "good.yaml"), filepath.Join(dir, "bad.yaml")
	write(t, good, "endpoints:\n  - {name: vllm-0, address: \"10.0.0.1\", port: \"8000\"}\n")
	write(t, bad, "endpoints:\n  - {name: vllm-0, address: \"10.0.0.1\", port: \"0\"}\n")
	if err := Check("p", good, false); err != nil {
		t.Errorf("good file: %v", err)
	}
	for path, want := range map[string]string{
		bad:                             "endpoints file " + bad + ": line 2: endpoint 1 (vllm-0): port:",
		filepath.Join(dir, "none.yaml"): "no such file",
	} {
		if err := Check("p", path, false); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error containing %q", path, err, want)
		}
	}
}
