package chartcheck

import (
	"maps"
	"slices"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The callers each gRPC port admits by default (Hermod's pods), beside
// extprocFrom for the picker.
var grpcCallers = map[string][]string{"picker": {"gateway"}, "indexer": {"picker"}, "responses": {"gateway"}}

// TestNetworkPolicies: by default every service has a NetworkPolicy
// selecting exactly its pods, with a rule for each of its container ports:
// a gRPC port admits only its Hermod callers (the picker also
// extprocFrom), an ops port opsFrom, the gateway's API anyone; turned off,
// there are none.
func TestNetworkPolicies(t *testing.T) {
	t.Parallel()
	r := render(t)
	check(t, r)
	if n := len(r.byKind("NetworkPolicy")); n != len(services) {
		t.Fatalf("%d NetworkPolicies by default, want one per service (%d)", n, len(services))
	}
	anyPod := networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{}}
	for _, svc := range services {
		d, c := container(t, r, svc)
		o := r.get("NetworkPolicy", namespace, release+"-"+svc)
		if o == nil {
			t.Errorf("%s: no NetworkPolicy", svc)
			continue
		}
		np := o.Obj.(*networkingv1.NetworkPolicy)
		if !maps.Equal(np.Spec.PodSelector.MatchLabels, d.Spec.Selector.MatchLabels) || !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) {
			t.Errorf("%s: selects %v (%v), the Deployment's pods are %v", svc, np.Spec.PodSelector.MatchLabels, np.Spec.PolicyTypes, d.Spec.Selector.MatchLabels)
		}
		rules := map[string][]networkingv1.NetworkPolicyPeer{}
		for _, rule := range np.Spec.Ingress {
			if len(rule.Ports) != 1 || rule.Ports[0].Port == nil {
				t.Fatalf("%s: rule %+v", svc, rule)
			}
			rules[rule.Ports[0].Port.String()] = rule.From
		}
		for _, p := range c.Ports {
			from, ok := rules[p.Name]
			if !ok {
				t.Errorf("%s: port %s admits no one", svc, p.Name)
				continue
			}
			switch p.Name {
			case "grpc":
				var want []networkingv1.NetworkPolicyPeer
				for _, caller := range grpcCallers[svc] {
					want = append(want, networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{
						"app.kubernetes.io/name": "hermod-" + caller, "app.kubernetes.io/instance": release}}})
				}
				if svc == "picker" {
					want = append(want, anyPod) // extprocFrom's default
				}
				if !peersEqual(from, want) {
					t.Errorf("%s: gRPC admits %+v, want %+v", svc, from, want)
				}
			case "http": // the gateway's API
				if from != nil {
					t.Errorf("%s: the API admits only %+v", svc, from)
				}
			default: // ops, ZMQ
				if !peersEqual(from, []networkingv1.NetworkPolicyPeer{anyPod}) {
					t.Errorf("%s: %s admits %+v", svc, p.Name, from)
				}
			}
		}
		if len(rules) != len(c.Ports) {
			t.Errorf("%s: %d rules for %d ports", svc, len(rules), len(c.Ports))
		}
	}

	narrow := render(t, "--set-json", `global.networkPolicy.extprocFrom=[{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"envoy-gateway-system"}}}]`)
	check(t, narrow)
	np := narrow.get("NetworkPolicy", namespace, release+"-picker").Obj.(*networkingv1.NetworkPolicy)
	for _, rule := range np.Spec.Ingress {
		if rule.Ports[0].Port.String() != "grpc" {
			continue
		}
		if len(rule.From) != 2 || rule.From[1].NamespaceSelector == nil || rule.From[1].NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != "envoy-gateway-system" {
			t.Errorf("the picker with extprocFrom narrowed admits %+v", rule.From)
		}
	}

	off := render(t, "--set", "global.networkPolicy.enabled=false")
	check(t, off)
	if n := len(off.byKind("NetworkPolicy")); n != 0 {
		t.Errorf("global.networkPolicy.enabled=false: %d NetworkPolicies", n)
	}
}

func peersEqual(a, b []networkingv1.NetworkPolicyPeer) bool {
	return slices.EqualFunc(a, b, func(x, y networkingv1.NetworkPolicyPeer) bool {
		return x.String() == y.String()
	})
}
