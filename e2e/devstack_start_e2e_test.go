package e2e

import (
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// devstackFails runs hermod-devstack with args and returns its output once
// it exits; it must exit with an error within 15 s.
func devstackFails(t *testing.T, args ...string) string {
	t.Helper()
	sim, kv := freePorts(t, 4), freePorts(t, 8)
	cmd := exec.Command(bin("hermod-devstack"), append([]string{"--bin-dir", binDir, "--nats-port", "0", "--etcd-port", "0",
		"--listen", fmt.Sprintf("127.0.0.1:%d", freePorts(t, 1)), "--sim-base-port", fmt.Sprint(sim), "--kv-base-port", fmt.Sprint(kv)}, append(tlsArgs(), args...)...)...)
	done := make(chan struct{})
	var out []byte
	var err error
	go func() { out, err = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("hermod-devstack %v still running after 15s:\n%s", args, tail(string(out), 20))
	}
	if err == nil {
		t.Fatalf("hermod-devstack %v exited cleanly", args)
	}
	return string(out)
}

// A pod that dies at start stops the stack at once with the pod's own
// error, and a taken KV-event port is found before anything starts.
func TestDevstackStartFailures(t *testing.T) {
	if testing.Short() {
		t.Skip("runs hermod-devstack; skipped with -short")
	}
	out := devstackFails(t, "--pods", "2", "--sim-args=--no-such-flag")
	if !strings.Contains(out, "exited while starting") || !strings.Contains(out, "no-such-flag") {
		t.Errorf("a pod dying at start:\n%s", tail(out, 20))
	}
	l, taken := takenAfterFree(t)
	defer l.Close()
	out = devstackFails(t, "--pods", "1", "--kv-base-port", fmt.Sprint(taken-1))
	if !strings.Contains(out, fmt.Sprintf("port %d is in use", taken)) || !strings.Contains(out, "--kv-base-port") {
		t.Errorf("a taken KV port:\n%s", tail(out, 20))
	}
}

// takenAfterFree holds a port whose predecessor is free (so that the
// devstack's check passes the first KV port and stops at the second).
func takenAfterFree(t *testing.T) (net.Listener, int) {
	t.Helper()
	for range 20 {
		l, err := net.Listen("tcp", ":0")
		if err != nil {
			t.Fatal(err)
		}
		taken := l.Addr().(*net.TCPAddr).Port
		if before, err := net.Listen("tcp", fmt.Sprintf(":%d", taken-1)); err == nil {
			_ = before.Close()
			return l, taken
		}
		_ = l.Close()
	}
	t.Fatal("found no free port before a taken one")
	return nil, 0
}
