package app

import (
	"net"
	"testing"
)

// Every listener defaults to loopback: a autoscaler started by hand serves
// nobody else (a deployment passes the pod's address).
func TestDefaultListenIsLoopback(t *testing.T) {
	for _, addr := range []string{DefaultMetricsListen} {
		host, _, err := net.SplitHostPort(addr)
		if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
			t.Errorf("default listen address %q is not loopback", addr)
		}
	}
}
