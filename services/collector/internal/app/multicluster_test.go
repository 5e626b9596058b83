package app

import (
	"testing"

	"github.com/hermod/hermod/libs/plugins/datalayer"
)

// A multicluster-file-discovery names a file of clusters: the collector
// reads its addresses as host names, and polls each cluster with the
// config's multicluster-metrics-data-source and extractor (the cluster
// pool averages reach the pickers as attributes).
func TestMultiClusterConfigIsFollowed(t *testing.T) {
	for typ, hostNames := range map[string]bool{"file-discovery": false, "multicluster-file-discovery": true} {
		s, err := buildConfig([]byte(`
plugins:
- {type: ` + typ + `, name: discovery, parameters: {path: /etc/epp/clusters.yaml, watchFile: true}}
- {type: multicluster-metrics-data-source, name: metrics-source, parameters: {caCertPath: /etc/epp/tls/ca.crt}}
- {type: multicluster-metrics-extractor, name: metrics-extractor}
- type: multicluster-queue-scorer
- type: max-score-picker
schedulingProfiles:
- name: default
  plugins: [{pluginRef: multicluster-queue-scorer}, {pluginRef: max-score-picker}]
dataLayer:
  discovery: {pluginRef: discovery}
  sources:
  - pluginRef: metrics-source
    extractors: [{pluginRef: metrics-extractor}]
`))
		if err != nil {
			t.Fatalf("%s: %v", typ, err)
		}
		spec := discoveryOf(s)
		if spec.path != "/etc/epp/clusters.yaml" || spec.once || spec.hostNames != hostNames {
			t.Errorf("%s: %+v, want host names %v", typ, spec, hostNames)
		}
		polls := attributePollsOf(s)
		if len(polls) != 1 || polls[0].Source.TypedName().Type != datalayer.MultiClusterMetricsSourceType ||
			len(polls[0].Extractors) != 1 || polls[0].Extractors[0].TypedName().Type != datalayer.MultiClusterExtractorType {
			t.Errorf("%s: attribute polls %+v", typ, polls)
		}
		if metricsSourceOf(s) != nil {
			t.Errorf("%s: the engine metrics are scraped as the multicluster source says", typ)
		}
		_ = s.Close()
	}
}
