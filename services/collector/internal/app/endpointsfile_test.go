package app

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
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
