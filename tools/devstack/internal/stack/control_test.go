package stack

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hermod/hermod/libs/bus"
	"github.com/hermod/hermod/tools/devstack/stackstate"
)

// The control endpoint stops and starts the embedded servers, and answers
// where they are; it refuses what it cannot do and a non-loopback address.
func TestControlEndpoint(t *testing.T) {
	if testing.Short() {
		t.Skip("starts embedded etcd and NATS (skipped with -short)")
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	s := &stack{o: Options{DataDir: t.TempDir(), SimBasePort: 1, KVBasePort: 1, ControlListen: "127.0.0.1:0"},
		log: slog.New(slog.NewTextHandler(io.Discard, nil)), state: stackstate.State{PIDs: map[string]int{}}}
	t.Cleanup(func() {
		if err := s.shutdown(); err != nil {
			t.Error(err)
		}
	})
	if err := s.servers(ctx); err != nil {
		t.Fatal(err)
	}
	cctx, stopControl := context.WithCancel(ctx)
	defer stopControl()
	if err := s.startControl(cctx); err != nil {
		t.Fatal(err)
	}
	base := "http://" + s.state.Control

	get := func() Backends {
		t.Helper()
		resp, err := http.Get(base + "/backends")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b Backends
		if err := json.NewDecoder(resp.Body).Decode(&b); err != nil {
			t.Fatal(err)
		}
		return b
	}
	post := func(path string, want int) string {
		t.Helper()
		resp, err := http.Post(base+path, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != want {
			t.Fatalf("POST %s: %d %s, want %d", path, resp.StatusCode, body, want)
		}
		return string(body)
	}

	b := get()
	if len(b.NATS) != 1 || !b.NATS[0].Running || len(b.Etcd) != 1 || !b.Etcd[0].Running || b.EtcdLeader != 0 || b.StreamLeaders[bus.DecisionsStream] != 0 {
		t.Fatalf("backends at start: %+v", b)
	}
	post("/backends/nats/0/stop", http.StatusNoContent)
	post("/backends/etcd/0/kill", http.StatusNoContent)
	if b := get(); b.NATS[0].Running || b.Etcd[0].Running || b.EtcdLeader != -1 || b.StreamLeaders[bus.DecisionsStream] != -1 {
		t.Fatalf("backends stopped: %+v", b)
	}
	post("/backends/nats/0/start", http.StatusNoContent)
	post("/backends/etcd/0/start", http.StatusNoContent)
	if b := get(); !b.NATS[0].Running || !b.Etcd[0].Running || b.EtcdLeader != 0 {
		t.Fatalf("backends started again: %+v", b)
	}
	if msg := post("/backends/nats/3/stop", http.StatusBadRequest); !strings.Contains(msg, "no NATS server 3") {
		t.Errorf("unknown server: %q", msg)
	}
	if msg := post("/backends/redis/0/stop", http.StatusBadRequest); !strings.Contains(msg, "nats or etcd") {
		t.Errorf("unknown backend: %q", msg)
	}
	if msg := post("/backends/etcd/0/pause", http.StatusBadRequest); !strings.Contains(msg, "stop, kill or start") {
		t.Errorf("unknown action: %q", msg)
	}
	if _, err := s.serveControl(ctx, "0.0.0.0:0"); err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Errorf("a non-loopback control address: %v", err)
	}
}
