package standard_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hermod/hermod/libs/plugins/datalayer"
	"github.com/hermod/hermod/libs/plugins/prefix"
	"github.com/hermod/hermod/libs/plugins/session"
	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/libs/scheduling/schedulingtest"
)

// multiClusterConfig is the multi-cluster wiring of the corpus, its
// clusters scraped over scheme; without the extractor, neither it nor its
// binding.
func multiClusterConfig(scheme string, withExtractor bool) string {
	extractor, binding := "", ""
	if withExtractor {
		extractor = "- type: multicluster-metrics-extractor\n  name: metrics-extractor\n"
		binding = "    extractors:\n    - pluginRef: metrics-extractor\n"
	}
	return fmt.Sprintf(`apiVersion: llm-d.ai/v1alpha1
kind: EndpointPickerConfig
plugins:
- type: multicluster-file-discovery
  name: discovery
  parameters: {path: /etc/epp/clusters.yaml}
- type: multicluster-metrics-data-source
  name: metrics-source
  parameters: {scheme: %s}
%s- type: multicluster-session-affinity-filter
  name: session-affinity
- type: multicluster-kv-cache-utilization-scorer
  name: kv-cache
- type: multicluster-queue-scorer
  name: queue
- type: max-score-picker
- type: single-profile-handler
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: session-affinity
  - pluginRef: kv-cache
  - pluginRef: queue
  - pluginRef: max-score-picker
dataLayer:
  discovery:
    pluginRef: discovery
  sources:
  - pluginRef: metrics-source
%s`, scheme, extractor, binding)
}

func loadText(t *testing.T, config string) (*scheduling.Scheduler, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	return load(t, path)
}

// The documented wiring loads, each name resolving to its multicluster
// type; without the extractor the metric scorers would never see a
// cluster's averages, and the config fails to load saying so.
func TestMultiClusterWiring(t *testing.T) {
	s, err := loadText(t, multiClusterConfig("https", true))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	types := map[string]string{}
	for _, p := range s.Plugins() {
		types[p.TypedName().Name] = p.TypedName().Type
	}
	for name, want := range map[string]string{
		"discovery":         "multicluster-file-discovery",
		"metrics-source":    "multicluster-metrics-data-source",
		"metrics-extractor": "multicluster-metrics-extractor",
		"session-affinity":  "multicluster-session-affinity-filter",
		"kv-cache":          "multicluster-kv-cache-utilization-scorer",
		"queue":             "multicluster-queue-scorer",
	} {
		if types[name] != want {
			t.Errorf("%s is %q, want %s", name, types[name], want)
		}
	}

	_, err = loadText(t, multiClusterConfig("https", false))
	for _, want := range []string{"kv-cache", datalayer.MultiClusterKVCacheUtilizationKey, "queue", datalayer.MultiClusterQueueSizeKey, "dataLayer.sources"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("without the extractor: %v, want an error naming %s", err, want)
		}
	}
	// declared, but not extracting from any source: the same
	unbound := strings.Replace(multiClusterConfig("https", true), "    extractors:\n    - pluginRef: metrics-extractor\n", "", 1)
	if _, err := loadText(t, unbound); err == nil || !strings.Contains(err.Error(), datalayer.MultiClusterQueueSizeKey) {
		t.Errorf("with the extractor bound to no source: %v", err)
	}
}

// clusterServer serves a cluster endpoint picker's pool averages.
func clusterServer(t *testing.T, kv, queue float64) *scheduling.Endpoint {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintf(w, "# TYPE llm_d_epp_average_kv_cache_utilization gauge\nllm_d_epp_average_kv_cache_utilization %v\n"+
			"# TYPE llm_d_epp_average_queue_size gauge\nllm_d_epp_average_queue_size %v\n", kv, queue)
	}))
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	host, port, _ := net.SplitHostPort(u.Host)
	p, _ := strconv.Atoi(port)
	// the cluster is routed to at its gateway; its metrics are served apart
	return scheduling.NewEndpoint(fmt.Sprintf("cluster-%v-%v", kv, queue), "gw.example.com", 443,
		map[string]string{datalayer.MetricsAddressLabel: host, datalayer.MetricsPortLabel: strconv.Itoa(p)})
}

// Clusters scraped by the config's own source and extractor are ranked by
// their pool averages; a session stays on its cluster however loaded.
func TestMultiClusterRouting(t *testing.T) {
	s, err := loadText(t, multiClusterConfig("http", true))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	var src scheduling.DataSource
	var x scheduling.DataExtractor
	for _, p := range s.Plugins() {
		switch p.TypedName().Name {
		case "metrics-source":
			src = p.(scheduling.DataSource)
		case "metrics-extractor":
			x = p.(scheduling.DataExtractor)
		}
	}
	ctx := context.Background()
	clusters := []*scheduling.Endpoint{clusterServer(t, 0.9, 12), clusterServer(t, 0.2, 3), clusterServer(t, 0.5, 30)}
	for i, c := range clusters {
		data, err := src.Fetch(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		ep := *c
		if err := x.Extract(ctx, data, &ep); err != nil {
			t.Fatal(err)
		}
		clusters[i] = &ep
	}
	schedule := func(req *scheduling.Request) string {
		t.Helper()
		res, err := s.Schedule(ctx, req, clusters)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Release()
		return res.Target().Endpoint.Name
	}
	// kv 1-0.9, 1-0.2, 1-0.5 plus queue (30-12)/27, 1, 0: the second wins
	if got := schedule(schedulingtest.Completion("1", "m", "hello")); got != clusters[1].Name {
		t.Errorf("picked %s, want the least loaded %s", got, clusters[1].Name)
	}
	pinned := schedulingtest.Completion("2", "m", "hello again")
	pinned.Headers = map[string]string{session.TokenHeader: session.Token(clusters[2].Name)}
	if got := schedule(pinned); got != clusters[2].Name {
		t.Errorf("a session of %s went to %s", clusters[2].Name, got)
	}
}

// Over clusters the approximate prefix index keys blocks by cluster: a
// conversation's next turn goes back to the cluster its first went to.
func TestMultiClusterPrefixHomesToCluster(t *testing.T) {
	s, err := load(t, "testdata/upstream/multicluster-prefix.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	for _, p := range s.Describe().Plugins {
		if p.Type == prefix.MultiClusterType {
			if b, ok := p.Parameters.(prefix.BoundParams); !ok || b.PrefixMatchInfoProducerName != prefix.MultiClusterProducerType {
				t.Errorf("%s reads %+v, want the declared %s", p.Name, p.Parameters, prefix.MultiClusterProducerType)
			}
		}
	}
	ctx := context.Background()
	clusters := []*scheduling.Endpoint{
		scheduling.NewEndpoint("us-east", "gw.us-east.example.com", 443, nil),
		scheduling.NewEndpoint("eu-west", "gw.eu-west.example.com", 443, nil),
		scheduling.NewEndpoint("ap-south", "10.20.0.1", 8443, nil),
	}
	first := map[int]string{}
	for round := range 2 {
		for conv := range 6 {
			// 64-token blocks: a shared prefix of several blocks
			text := strings.Repeat(fmt.Sprintf("conversation %d says something long enough. ", conv), 60)
			if round == 1 {
				text += " and a follow-up question"
			}
			res, err := s.Schedule(ctx, schedulingtest.Completion(fmt.Sprint(round, conv), "m", text), clusters)
			if err != nil {
				t.Fatal(err)
			}
			got := res.Target().Endpoint.Name
			res.Release()
			if round == 0 {
				first[conv] = got
			} else if got != first[conv] {
				t.Errorf("conversation %d: follow-up went to %s, first turn to %s", conv, got, first[conv])
			}
		}
	}
}
