package scorer

import (
	"github.com/hermod/hermod/libs/plugins/datalayer"
	"github.com/hermod/hermod/libs/scheduling"
)

// The multi-cluster scorers (llm-d router v0.10): over a pool whose
// endpoints are clusters (multicluster-file-discovery), queue-scorer's and
// kv-cache-utilization-scorer's formulas applied to each cluster's pool
// averages, which multicluster-metrics-extractor sets as attributes. A
// cluster has no engine metrics of its own, so a cluster without the
// attribute (not scraped yet, or its scrape failing) scores 0. A config
// with either scorer but without the extractor listed in its data section
// fails to load.
const (
	MultiClusterQueueType   = "multicluster-queue-scorer"
	MultiClusterKVCacheType = "multicluster-kv-cache-utilization-scorer"
)

func init() {
	scheduling.Register(scheduling.Registration{Type: MultiClusterQueueType, New: noParams(MultiClusterQueueType, func(n scheduling.Named) scheduling.Plugin {
		return &MultiClusterQueue{MinMax{Named: n, value: clusterAttribute(datalayer.MultiClusterQueueSizeKey)}}
	})})
	scheduling.Register(scheduling.Registration{Type: MultiClusterKVCacheType, New: noParams(MultiClusterKVCacheType, func(n scheduling.Named) scheduling.Plugin {
		return &MultiClusterKVCache{KVCache{Named: n, usage: clusterAttribute(datalayer.MultiClusterKVCacheUtilizationKey)}}
	})})
}

func clusterAttribute(key string) func(*scheduling.Endpoint) (float64, bool) {
	return func(e *scheduling.Endpoint) (float64, bool) { return e.Attribute(key) }
}

// MultiClusterQueue is multicluster-queue-scorer: (max - q)/(max - min)
// of the clusters' average queue sizes q; all equal score 1.
type MultiClusterQueue struct{ MinMax }

// RequiredAttributes implements scheduling.AttributeConsumer.
func (*MultiClusterQueue) RequiredAttributes() []string {
	return []string{datalayer.MultiClusterQueueSizeKey}
}

// MultiClusterKVCache is multicluster-kv-cache-utilization-scorer: 1 - the
// cluster's average KV-cache utilisation.
type MultiClusterKVCache struct{ KVCache }

// RequiredAttributes implements scheduling.AttributeConsumer.
func (*MultiClusterKVCache) RequiredAttributes() []string {
	return []string{datalayer.MultiClusterKVCacheUtilizationKey}
}

var (
	_ scheduling.Scorer            = (*MultiClusterQueue)(nil)
	_ scheduling.AttributeConsumer = (*MultiClusterKVCache)(nil)
)
