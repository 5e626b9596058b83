package scorer_test

import (
	"math"
	"testing"

	"github.com/hermod/hermod/libs/plugins/datalayer"
	"github.com/hermod/hermod/libs/plugins/scorer"
	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/libs/scheduling/schedulingtest"
)

// clusters returns cluster endpoints with the given pool averages
// (NaN: the attribute is missing, as before a cluster's first scrape).
func clusters(key string, vs ...float64) []*scheduling.Endpoint {
	eps := schedulingtest.Endpoints(len(vs))
	for i, v := range vs {
		// the clusters' engine gauges are empty: only the attributes count
		eps[i].Metrics = &scheduling.Metrics{WaitingRequests: 1000 * i, KVCacheUsage: 1}
		if !math.IsNaN(v) {
			datalayer.SetAttribute(eps[i], key, v)
		}
	}
	return eps
}

func TestMultiClusterScorers(t *testing.T) {
	nan := math.NaN()
	for _, c := range []struct {
		name, typ, key string
		values, want   []float64
	}{
		// (max - q)/(max - min) over the clusters' average queues
		{"queue spread", scorer.MultiClusterQueueType, datalayer.MultiClusterQueueSizeKey, []float64{2, 4, 10}, []float64{1, 0.75, 0}},
		{"queue fractional", scorer.MultiClusterQueueType, datalayer.MultiClusterQueueSizeKey, []float64{0.5, 1.5}, []float64{1, 0}},
		{"queue all equal", scorer.MultiClusterQueueType, datalayer.MultiClusterQueueSizeKey, []float64{3, 3}, []float64{1, 1}},
		// a cluster without the attribute scores 0 and leaves the range alone
		{"queue missing", scorer.MultiClusterQueueType, datalayer.MultiClusterQueueSizeKey, []float64{2, nan, 6}, []float64{1, 0, 0}},
		{"queue none", scorer.MultiClusterQueueType, datalayer.MultiClusterQueueSizeKey, []float64{nan, nan}, []float64{0, 0}},
		// 1 - the cluster's average KV-cache utilisation
		{"kv", scorer.MultiClusterKVCacheType, datalayer.MultiClusterKVCacheUtilizationKey, []float64{0.25, 0.9, 0}, []float64{0.75, 0.1, 1}},
		{"kv missing", scorer.MultiClusterKVCacheType, datalayer.MultiClusterKVCacheUtilizationKey, []float64{nan, 0.5}, []float64{0, 0.5}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := schedulingtest.New[scheduling.Scorer](t, schedulingtest.NewHandle(), c.typ, "", "")
			if s.TypedName().Type != c.typ {
				t.Errorf("type %s", s.TypedName().Type)
			}
			eps := clusters(c.key, c.values...)
			got := schedulingtest.Score(s, schedulingtest.CycleState(1), schedulingtest.Completion("r", "m", "hi"), eps)
			for i := range c.want {
				if math.Abs(got[i]-c.want[i]) > 1e-9 {
					t.Errorf("scores %v, want %v", got, c.want)
					break
				}
			}
			if r, ok := s.(scheduling.AttributeConsumer); !ok || len(r.RequiredAttributes()) != 1 || r.RequiredAttributes()[0] != c.key {
				t.Errorf("requires %v, want %s", r, c.key)
			}
		})
	}
	if _, err := schedulingtest.NewErr(schedulingtest.NewHandle(), scorer.MultiClusterQueueType, "", `{"threshold": 3}`); err != nil {
		t.Errorf("an unknown parameter is a warning, got %v", err)
	}
}
