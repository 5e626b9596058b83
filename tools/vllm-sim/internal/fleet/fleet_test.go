package fleet

import (
	"context"
	"io"
	"log/slog"
	"sort"
	"strings"
	"testing"
	"time"

	registryv1 "github.com/hermod/hermod/libs/api/hermod/registry/v1"
	"github.com/hermod/hermod/libs/coord"
	"github.com/hermod/hermod/testkit/coordtest"
	"github.com/hermod/hermod/tools/vllm-sim/internal/cli"
)

func TestOffsetEndpoint(t *testing.T) {
	for _, c := range []struct {
		ep   string
		i    int
		want string
	}{
		{"tcp://*:5557", 0, "tcp://*:5557"},
		{"tcp://*:5557", 3, "tcp://*:5560"},
		{"tcp://indexer:5557", 1, "tcp://indexer:5558"},
		{"tcp://[::]:5557", 2, "tcp://[::]:5559"},
		{"ipc:///tmp/kv", 1, "ipc:///tmp/kv-1"},
	} {
		got, err := offsetEndpoint(c.ep, c.i)
		if err != nil || got != c.want {
			t.Errorf("offsetEndpoint(%q, %d) = %q, %v; want %q", c.ep, c.i, got, err, c.want)
		}
	}
	if _, err := offsetEndpoint("tcp://nohost", 1); err == nil {
		t.Error("malformed endpoint accepted")
	}
}

func list(t *testing.T, srv *coordtest.Server, pool string) []*registryv1.Endpoint {
	t.Helper()
	cli := srv.Client(t)
	eps, _, err := coord.ListEndpoints(context.Background(), cli, pool)
	if err != nil {
		t.Fatal(err)
	}
	return eps
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Each pod registers itself in etcd once it listens, with the endpoint
// record of Hermod's registry; a crashed pod leaves and comes back; all
// leave when the fleet stops.
func TestRegistration(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an etcd server")
	}
	srv, err := coordtest.NewServer()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	pool := coordtest.PoolName(t)
	opts, err := cli.Parse([]string{"serve", "m", "--served-model-name", "llama", "--host", "127.0.0.1", "--port", "0",
		"--pods", "2", "--pool", pool, "--etcd-endpoints", strings.Join(srv.Endpoints(), ","), "--registration-ttl", "2s",
		"--enable-lora", "--lora-modules", "sql=/a/sql", "--labels", "zone=a", "--pod-labels", "1:mif.moreh.io/role=decode",
		"--kv-events-config", `{"enable_kv_cache_events":true,"endpoint":"tcp://*:0","topic":"kv@{pod}@{model}"}`}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	// tcp://*:0 cannot be offset per pod: use ipc endpoints instead
	opts.KVEvents.Endpoint = "ipc://" + t.TempDir() + "/kv"
	f, err := New(opts, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	waitFor(t, "two registrations", func() bool { return len(list(t, srv, pool)) == 2 })
	eps := list(t, srv, pool)
	sort.Slice(eps, func(i, j int) bool { return eps[i].GetName() < eps[j].GetName() })
	e0, e1 := eps[0], eps[1]
	if e0.GetName() != "vllm-sim-0" || e0.GetAddress() != "127.0.0.1" || int(e0.GetPort()) != f.Pods()[0].Config().Port ||
		e0.GetModel() != "llama" || strings.Join(e0.GetServedModels(), ",") != "llama,sql" || e0.GetLabels()["zone"] != "a" ||
		e0.GetKvEventsTopic() != "kv@vllm-sim-0@llama" || !strings.HasPrefix(e0.GetKvEventsEndpoint(), "ipc://") {
		t.Errorf("pod 0 record %v", e0)
	}
	if e1.GetLabels()["mif.moreh.io/role"] != "decode" || e1.GetLabels()["zone"] != "a" || e1.GetKvEventsEndpoint() == e0.GetKvEventsEndpoint() {
		t.Errorf("pod 1 record %v", e1)
	}
	// A crash takes the pod out of the registry until it is back.
	crashed := make(chan error, 1)
	go func() { crashed <- f.Pods()[1].Crash(ctx, 500*time.Millisecond) }()
	waitFor(t, "the crashed pod to leave", func() bool { return len(list(t, srv, pool)) == 1 })
	if err := <-crashed; err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the restarted pod to return", func() bool { return len(list(t, srv, pool)) == 2 })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := len(list(t, srv, pool)); n != 0 {
		t.Errorf("%d registrations left after the fleet stopped", n)
	}
}

func TestPortCollisions(t *testing.T) {
	opts, err := cli.Parse([]string{"--pods", "3", "--port", "8000", "--kv-events-config",
		`{"enable_kv_cache_events":true,"endpoint":"tcp://*:8001","replay_endpoint":"tcp://*:9000"}`}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	_, err = New(opts, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err == nil || !strings.Contains(err.Error(), "port 8001 is both vllm-sim-0 KV events and vllm-sim-1 HTTP") {
		t.Errorf("error %v", err)
	}
}

// Several processes serve one pool with distinct pod names.
func TestFirstPodIndexNamesPods(t *testing.T) {
	opts, err := cli.Parse([]string{"serve", "m", "--host", "127.0.0.1", "--port", "0", "--pods", "2", "--first-pod-index", "5"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	f, err := New(opts, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer f.closePods()
	if a, b := f.Pods()[0].Config().Name, f.Pods()[1].Config().Name; a != "vllm-sim-5" || b != "vllm-sim-6" {
		t.Errorf("pod names %s %s", a, b)
	}
}
