package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A model server Hermod did not start: the devstack runs with no pods, an
// operator registers a separately started server with hermodctl, requests
// are routed to it, and after deregistering the pool has none again.
func TestExternalEndpointRegisteredByHand(t *testing.T) {
	s := startStack(t, "--pods", "0")
	pod := startSim(t, 1, "--speed", "50")
	addr := fmt.Sprintf("127.0.0.1:%d", pod.base)
	state := filepath.Join(t.TempDir(), "state.json")
	if err := s.state.Write(state); err != nil {
		t.Fatal(err)
	}
	out, errs, code := hermodctl(t, "--state-file", state, "endpoints", "register", "--model", "sim-model", "--labels", "zone=vm", "--permanent", "vm-0", addr)
	if code != 0 {
		t.Fatalf("register: %d %s %s", code, out, errs)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var r result
	waitFor(t, 30*time.Second, "a request served by the registered server", func() bool {
		r = s.send(ctx, "/v1/completions", `{"model":"sim-model","prompt":"hello","max_tokens":4}`, false)
		return r.ok()
	})
	if r.servedBy != addr {
		t.Errorf("served by %q, want %s", r.servedBy, addr)
	}
	if out, errs, code := hermodctl(t, "--state-file", state, "endpoints", "list"); code != 0 || !strings.Contains(out, "vm-0") {
		t.Fatalf("list: %d %s %s", code, out, errs)
	}
	if _, errs, code := hermodctl(t, "--state-file", state, "endpoints", "deregister", "vm-0"); code != 0 {
		t.Fatalf("deregister: %s", errs)
	}
	waitFor(t, 30*time.Second, "no endpoint after deregistering", func() bool {
		r = s.send(ctx, "/v1/completions", `{"model":"sim-model","prompt":"hello","max_tokens":4}`, false)
		return r.status == 503 || r.status == 404
	})
}
