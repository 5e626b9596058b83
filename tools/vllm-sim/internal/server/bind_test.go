package server

import (
	"fmt"
	"net"
	"testing"
	"time"
)

// nonLoopbackIPv4 returns an address of this machine that is not
// loopback, or "" when it has none.
func nonLoopbackIPv4(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			return n.IP.String()
		}
	}
	return ""
}

// A pod told to serve on 127.0.0.1 binds its KV event sockets (given as
// tcp://*:port, as vLLM takes them) on 127.0.0.1 too, not on every
// interface.
func TestKVSocketsBindWhereThePodServes(t *testing.T) {
	other := nonLoopbackIPv4(t)
	if other == "" {
		t.Skip("this machine has no non-loopback IPv4 address to probe")
	}
	p := startPod(t, nil)
	for _, port := range []int{p.zmqPort, p.replayPort} {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
		if err != nil {
			t.Fatalf("KV socket on 127.0.0.1:%d: %v", port, err)
		}
		_ = c.Close()
		if c, err := net.DialTimeout("tcp", net.JoinHostPort(other, fmt.Sprint(port)), time.Second); err == nil {
			_ = c.Close()
			t.Errorf("KV socket %d is reachable on %s: it binds every interface", port, other)
		}
	}
}
