package chartcheck

import (
	"net"
	"slices"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// listenFlags are the flags that take a listen address.
var listenFlags = []string{"listen", "metrics-listen"}

// The binaries listen on loopback by default: every container is given
// the pod's address for each port it serves, and it is a containerPort.
// The gateway's ops port (/metrics) is on a ClusterIP Service of its own,
// never on the client-facing one, which may be a LoadBalancer.
func TestListenAddresses(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{nil, fullArgs(t)} {
		r := render(t, args...)
		for _, svc := range services {
			if r.get("Deployment", namespace, release+"-"+svc) == nil {
				continue
			}
			_, c := container(t, r, svc)
			for _, flag := range listenFlags {
				v, ok := argValue(c.Args, flag)
				if !ok {
					continue
				}
				host, port, err := net.SplitHostPort(v)
				n, _ := strconv.Atoi(port)
				if err != nil || host != "0.0.0.0" {
					t.Errorf("%v: %s --%s=%s: want the pod's address 0.0.0.0:<port>", args, svc, flag, v)
				}
				if !slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return int(p.ContainerPort) == n }) {
					t.Errorf("%v: %s --%s=%s: no containerPort %d", args, svc, flag, v, n)
				}
			}
			if _, ok := argValue(c.Args, "listen"); !ok && svc != "collector" && svc != "autoscaler" {
				t.Errorf("%v: %s is not given --listen", args, svc)
			}
		}
		_, gw := container(t, r, "gateway")
		if v, ok := argValue(gw.Args, "metrics-listen"); !ok || v != "0.0.0.0:9092" {
			t.Errorf("%v: gateway --metrics-listen=%q, want 0.0.0.0:9092", args, v)
		}
		front := r.get("Service", namespace, release+"-gateway").Obj.(*corev1.Service)
		if slices.ContainsFunc(front.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == "metrics" }) {
			t.Errorf("%v: the gateway's %s Service exposes its metrics port", args, front.Spec.Type)
		}
		ops := r.get("Service", namespace, release+"-gateway-ops")
		if ops == nil || ops.Obj.(*corev1.Service).Spec.Type != corev1.ServiceTypeClusterIP {
			t.Errorf("%v: no ClusterIP Service %s-gateway-ops for the gateway's ops port", args, release)
		}
	}
}
