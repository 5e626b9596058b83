package datalayer

import (
	"context"
	"encoding/pem"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/libs/scheduling/schedulingtest"
)

// A cluster's endpoint picker page: its pool averages, per pool, with the
// engine gauges its own scrape exports beside them.
const clusterPage = `# TYPE llm_d_epp_average_kv_cache_utilization gauge
llm_d_epp_average_kv_cache_utilization{name="pool-a"} 0.42
llm_d_epp_average_kv_cache_utilization{name="pool-b"} 0.9
# TYPE llm_d_epp_average_queue_size gauge
llm_d_epp_average_queue_size{name="pool-a"} 7
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{pod="p0"} 100
`

// clusterAt returns a cluster endpoint reached at srv's address.
func clusterAt(t *testing.T, srv *httptest.Server, labels map[string]string) *scheduling.Endpoint {
	t.Helper()
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(u.Host)
	p, _ := strconv.Atoi(port)
	return scheduling.NewEndpoint("cluster-a", host, p, labels)
}

func newMCSource(t *testing.T, params string) *MultiClusterSource {
	t.Helper()
	return schedulingtest.New[*MultiClusterSource](t, schedulingtest.NewHandle(), MultiClusterMetricsSourceType, "mc", params)
}

// The cross-cluster source defaults to https and verifies the peer: a
// self-signed cluster is refused unless its CA is given (caCertPath) or
// verification is turned off.
func TestMultiClusterSourceVerifiesPeers(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(clusterPage))
	}))
	defer srv.Close()
	ep := clusterAt(t, srv, nil)

	def := newMCSource(t, "")
	if p := def.Parameters().(MultiClusterSourceParams); p.Scheme != "https" || p.Path != "/metrics" || p.InsecureSkipVerify {
		t.Fatalf("defaults %+v, want https, /metrics, verified", p)
	}
	if _, err := def.Fetch(context.Background(), ep); err == nil {
		t.Error("a self-signed cluster was accepted by default")
	}
	if _, err := newMCSource(t, `{"insecureSkipVerify": true}`).Fetch(context.Background(), ep); err != nil {
		t.Errorf("insecureSkipVerify: %v", err)
	}

	ca := filepath.Join(t.TempDir(), "ca.crt")
	src := newMCSource(t, `{"caCertPath": `+strconv.Quote(ca)+`}`)
	if _, err := src.Fetch(context.Background(), ep); err == nil || !strings.Contains(err.Error(), "caCertPath") {
		t.Errorf("missing CA file: %v, want a caCertPath error", err)
	}
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := src.Fetch(context.Background(), ep) // read again after the failure
	if err != nil {
		t.Fatalf("with the cluster's CA: %v", err)
	}
	if f := got.(map[string]*dto.MetricFamily)[DefaultMultiClusterQueueMetric]; f == nil || len(f.GetMetric()) != 1 {
		t.Errorf("fetched %v, want the cluster's page", got)
	}
}

// A cluster whose metrics are served elsewhere says where with its
// metricsAddress (and metricsPort) labels; the port defaults to the
// cluster's.
func TestMultiClusterSourceMetricsAddress(t *testing.T) {
	src := newMCSource(t, `{"scheme": "http", "path": "/pool-metrics"}`)
	for _, c := range []struct {
		labels map[string]string
		want   string
	}{
		{nil, "http://gw.cluster-a.example.com:443/pool-metrics"},
		{map[string]string{MetricsAddressLabel: "metrics.cluster-a.internal"}, "http://metrics.cluster-a.internal:443/pool-metrics"},
		{map[string]string{MetricsAddressLabel: "10.0.0.9", MetricsPortLabel: "9090"}, "http://10.0.0.9:9090/pool-metrics"},
		{map[string]string{MetricsPortLabel: "9090"}, "http://gw.cluster-a.example.com:443/pool-metrics"},
	} {
		ep := scheduling.NewEndpoint("cluster-a", "gw.cluster-a.example.com", 443, c.labels)
		if got := src.URL(ep); got != c.want {
			t.Errorf("labels %v: %s, want %s", c.labels, got, c.want)
		}
	}
}

func TestMultiClusterSourceParamErrors(t *testing.T) {
	for params, field := range map[string]string{
		`{"scheme": "ftp"}`:                     "scheme",
		`{"clientCertPath": "/tls/tls.crt"}`:    "clientCertPath",
		`{"clientKeyPath": "/tls/tls.key"}`:     "clientCertPath",
		`{"interval": "-1s"}`:                   "interval",
		`{"path": "/metrics?x=1"}`:              "path",
		`{"caCertPath": "/ca.crt", "bogus": 1}`: "",
	} {
		_, err := schedulingtest.NewErr(schedulingtest.NewHandle(), MultiClusterMetricsSourceType, "mc", params)
		var pe *scheduling.ParamError
		switch {
		case field == "":
			if err != nil {
				t.Errorf("%s: %v (an unknown parameter is a warning)", params, err)
			}
		case !errors.As(err, &pe) || pe.Path != "parameters."+field:
			t.Errorf("%s: %v, want an error of %s", params, err, field)
		}
	}
}

// The extractor sets a cluster's pool averages as the two attributes the
// multicluster scorers read, from the series its parameters select.
func TestMultiClusterExtractor(t *testing.T) {
	families, err := ParseExposition([]byte(clusterPage))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, c := range []struct {
		params        string
		kv, queue     float64
		wantErr       string
		queueMissing  bool
		kvMissingMark bool
	}{
		{params: `{"kvCacheUtilizationMetric": "llm_d_epp_average_kv_cache_utilization{name=\"pool-a\"}"}`, kv: 0.42, queue: 7},
		{params: `{"kvCacheUtilizationMetric": "llm_d_epp_average_kv_cache_utilization{name=\"pool-b\"}", "queueSizeMetric": "llm_d_epp_average_queue_size{name=\"pool-a\"}"}`, kv: 0.9, queue: 7},
		{params: `{"queueSizeMetric": "vllm:num_requests_waiting"}`, kv: 0.42, queue: 100},
		{params: `{"queueSizeMetric": "llm_d_epp_average_queue_size{name=\"pool-z\"}"}`, kv: 0.42, wantErr: "no sample of llm_d_epp_average_queue_size", queueMissing: true},
	} {
		x := schedulingtest.New[*MultiClusterExtractor](t, schedulingtest.NewHandle(), MultiClusterExtractorType, "x", c.params)
		ep := scheduling.NewEndpoint("cluster-a", "gw.a", 443, nil)
		err := x.Extract(ctx, families, ep)
		if c.wantErr == "" && err != nil || c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)) {
			t.Errorf("%s: error %v, want %q", c.params, err, c.wantErr)
		}
		if v, ok := ep.Attribute(MultiClusterKVCacheUtilizationKey); !ok || v != c.kv {
			t.Errorf("%s: kv %v %v, want %v", c.params, v, ok, c.kv)
		}
		v, ok := ep.Attribute(MultiClusterQueueSizeKey)
		if c.queueMissing == ok || (ok && v != c.queue) {
			t.Errorf("%s: queue %v %v, want %v (missing %v)", c.params, v, ok, c.queue, c.queueMissing)
		}
	}
	x := schedulingtest.New[*MultiClusterExtractor](t, schedulingtest.NewHandle(), MultiClusterExtractorType, "x", "")
	if err := x.Extract(ctx, Exposition{}, scheduling.NewEndpoint("c", "h", 1, nil)); err == nil || !strings.Contains(err.Error(), MultiClusterMetricsSourceType) {
		t.Errorf("another source's data: %v", err)
	}
	if got := x.ProducedAttributes(); len(got) != 2 || got[0] != MultiClusterKVCacheUtilizationKey || got[1] != MultiClusterQueueSizeKey {
		t.Errorf("produces %v", got)
	}
}

// Of several samples of a selected series, the newest counts.
func TestMetricSpecLatest(t *testing.T) {
	families, err := ParseExposition([]byte("# TYPE q gauge\nq{pool=\"a\"} 3 1000\nq{pool=\"a\"} 5 3000\nq{pool=\"b\"} 9 9000\n"))
	if err != nil {
		t.Fatal(err)
	}
	spec, err := ParseMetricSpec(`q{pool="a"}`)
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := spec.Latest(families); !ok || v != 5 {
		t.Errorf("latest %v %v, want 5", v, ok)
	}
	for _, bad := range []string{"", `q{pool="a"`, `q{pool}`, `{pool="a"}`, `q r`} {
		if _, err := ParseMetricSpec(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	if _, err := schedulingtest.NewErr(schedulingtest.NewHandle(), MultiClusterExtractorType, "x", `{"queueSizeMetric": "q{"}`); err == nil {
		t.Error("a bad queueSizeMetric loaded")
	}
}

// multicluster-file-discovery is file-discovery whose addresses may be
// host names (the collector reads them so).
func TestMultiClusterFileDiscovery(t *testing.T) {
	d := schedulingtest.New[*MultiClusterFileDiscovery](t, schedulingtest.NewHandle(), MultiClusterFileDiscoveryType, "", `{"path": "/etc/epp/clusters.yaml", "watchFile": true}`)
	if d.TypedName().Type != MultiClusterFileDiscoveryType || d.TypedName().Name != MultiClusterFileDiscoveryType || d.EndpointsFile() != "/etc/epp/clusters.yaml" || !d.WatchFile() || !d.HostNames() {
		t.Errorf("got %v %s %v %v", d.TypedName(), d.EndpointsFile(), d.WatchFile(), d.HostNames())
	}
	if _, err := schedulingtest.NewErr(schedulingtest.NewHandle(), MultiClusterFileDiscoveryType, "d", ""); err == nil || !strings.Contains(err.Error(), "path") {
		t.Errorf("no path: %v", err)
	}
}
