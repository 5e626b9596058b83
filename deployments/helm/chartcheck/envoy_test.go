package chartcheck

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// The example Envoy configuration is checked structurally: go-control-plane
// is not a dependency of this module, so the YAML is read as a map and the
// fields that make Envoy mode work are asserted by their v3 names.

// node walks a decoded YAML tree.
type node struct {
	path string
	v    any
}

func (n node) get(key string) node {
	m, _ := n.v.(map[string]any)
	return node{n.path + "." + key, m[key]}
}

func (n node) list() []node {
	l, _ := n.v.([]any)
	out := make([]node, len(l))
	for i, v := range l {
		out[i] = node{fmt.Sprintf("%s[%d]", n.path, i), v}
	}
	return out
}

func (n node) str() string {
	s, _ := n.v.(string)
	return s
}

// find returns the elements of a list whose key has value.
func (n node) find(key, value string) []node {
	var out []node
	for _, e := range n.list() {
		if e.get(key).str() == value {
			out = append(out, e)
		}
	}
	return out
}

func TestEnvoyConfig(t *testing.T) {
	t.Parallel()
	repo := needRepo(t)
	data, err := os.ReadFile(repo.path("deployments", "envoy", "envoy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var root any
	if err := yaml.Unmarshal(data, &root); err != nil {
		t.Fatalf("envoy.yaml: %v", err)
	}
	cfg := node{"envoy.yaml", root}
	want := func(n node, v any) {
		t.Helper()
		if n.v != v {
			t.Errorf("%s = %v, want %v", n.path, n.v, v)
		}
	}

	// listener -> http_connection_manager -> ext_proc, then the router
	var hcm node
	for _, l := range cfg.get("static_resources").get("listeners").list() {
		for _, fc := range l.get("filter_chains").list() {
			for _, f := range fc.get("filters").find("name", "envoy.filters.network.http_connection_manager") {
				hcm = f.get("typed_config")
			}
		}
	}
	if hcm.v == nil {
		t.Fatal("no listener with the envoy.filters.network.http_connection_manager filter")
	}
	want(hcm.get("@type"), "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager")
	filters := hcm.get("http_filters").list()
	if len(filters) < 2 || filters[len(filters)-1].get("name").str() != "envoy.filters.http.router" {
		t.Errorf("%s: the last HTTP filter must be envoy.filters.http.router", hcm.path)
	}
	extProcs := hcm.get("http_filters").find("name", "envoy.filters.http.ext_proc")
	if len(extProcs) != 1 {
		t.Fatalf("%d envoy.filters.http.ext_proc filters, want 1", len(extProcs))
	}
	ep := extProcs[0].get("typed_config")
	want(ep.get("@type"), "type.googleapis.com/envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor")
	mode := ep.get("processing_mode")
	for field, value := range map[string]string{
		"request_header_mode":   "SEND",
		"request_body_mode":     "FULL_DUPLEX_STREAMED",
		"request_trailer_mode":  "SEND",
		"response_header_mode":  "SEND",
		"response_body_mode":    "FULL_DUPLEX_STREAMED",
		"response_trailer_mode": "SEND",
	} {
		want(mode.get(field), value)
	}
	want(ep.get("failure_mode_allow"), false)
	want(ep.get("allow_mode_override"), false)
	if !strings.HasSuffix(ep.get("message_timeout").str(), "s") {
		t.Errorf("%s = %v, want a duration such as 30s", ep.get("message_timeout").path, ep.get("message_timeout").v)
	}
	pickerCluster := ep.get("grpc_service").get("envoy_grpc").get("cluster_name").str()
	if pickerCluster == "" {
		t.Fatal("ext_proc has no grpc_service.envoy_grpc.cluster_name")
	}

	// the route goes to the ORIGINAL_DST cluster the picker's header names
	var routeClusters []string
	for _, vh := range hcm.get("route_config").get("virtual_hosts").list() {
		for _, r := range vh.get("routes").list() {
			routeClusters = append(routeClusters, r.get("route").get("cluster").str())
		}
	}
	if len(routeClusters) == 0 {
		t.Fatal("no route")
	}
	clusters := cfg.get("static_resources").get("clusters")
	for _, name := range routeClusters {
		cs := clusters.find("name", name)
		if len(cs) != 1 {
			t.Errorf("route cluster %q: %d clusters of that name", name, len(cs))
			continue
		}
		c := cs[0]
		want(c.get("type"), "ORIGINAL_DST")
		want(c.get("lb_policy"), "CLUSTER_PROVIDED")
		want(c.get("original_dst_lb_config").get("use_http_header"), true)
		want(c.get("original_dst_lb_config").get("http_header_name"), "x-gateway-destination-endpoint")
	}

	// the picker cluster speaks HTTP/2 to the chart's picker Service
	cs := clusters.find("name", pickerCluster)
	if len(cs) != 1 {
		t.Fatalf("picker cluster %q: %d clusters of that name", pickerCluster, len(cs))
	}
	pc := cs[0]
	opts := pc.get("typed_extension_protocol_options").get("envoy.extensions.upstreams.http.v3.HttpProtocolOptions")
	want(opts.get("@type"), "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions")
	if opts.get("explicit_http_config").get("http2_protocol_options").v == nil {
		t.Errorf("%s: no explicit_http_config.http2_protocol_options", opts.path)
	}
	var addrs []node
	for _, e := range pc.get("load_assignment").get("endpoints").list() {
		for _, lb := range e.get("lb_endpoints").list() {
			addrs = append(addrs, lb.get("endpoint").get("address").get("socket_address"))
		}
	}
	if len(addrs) == 0 {
		t.Fatalf("picker cluster %q has no endpoint", pickerCluster)
	}
	// the chart rendered as the file's comment says (release hermod in
	// namespace hermod) has that Service on that port
	r := render(t)
	for _, a := range addrs {
		host, port := a.get("address").str(), a.get("port_value").v
		parts := strings.Split(host, ".")
		if len(parts) < 3 || parts[2] != "svc" {
			t.Errorf("%s: %s is not a Service's DNS name", a.path, host)
			continue
		}
		svc := r.get("Service", parts[1], parts[0])
		if svc == nil {
			t.Errorf("%s: Service %s/%s is not in the chart's default render", a.path, parts[1], parts[0])
			continue
		}
		s := svc.Obj.(*corev1.Service)
		if !slices.ContainsFunc(s.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == "grpc" && float64(p.Port) == port }) {
			t.Errorf("%s: Service %s has no grpc port %v", a.path, s.Name, port)
		}
		if s.Labels["app.kubernetes.io/component"] != "picker" {
			t.Errorf("%s: Service %s is not the picker's", a.path, s.Name)
		}
	}
}
