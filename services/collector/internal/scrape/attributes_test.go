package scrape

import (
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	registryv1 "github.com/hermod/hermod/libs/api/hermod/registry/v1"
	"github.com/hermod/hermod/libs/plugins/datalayer"
	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/libs/scheduling/schedulingtest"
)

func dcgmPage(pod string, util int) string {
	return fmt.Sprintf("# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n"+
		"DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",pod=%q} %d\n"+
		"DCGM_FI_DEV_GPU_UTIL{gpu=\"1\",pod=\"someone-else\"} 99\n", pod, util)
}

// A DCGM exporter's GPU utilisation is fetched at its own interval,
// published with the endpoint's metrics, kept through failed fetches and
// dropped with the poll.
func TestAttributePollsPublishGPUUtilization(t *testing.T) {
	engine := newPod(t, vllmBody(1, 0, 0.2, 10))
	exporter := newPod(t, dcgmPage("vllm-0", 37))
	h := newHarness(t, Config{})
	h.s.SetEndpoints([]*registryv1.Endpoint{engine.endpoint("pool", "vllm-0")})

	gpu := func(m *eventsv1.PodMetrics) (float64, bool) {
		v, ok := m.GetAttributes()[datalayer.GPUUtilizationKey]
		return v, ok
	}
	first := h.rec.waitFor(t, "vllm-0", "a scrape", func(*eventsv1.PodMetrics) bool { return true })
	if _, ok := gpu(first); ok {
		t.Fatal("GPU utilisation published before any attribute poll")
	}

	hd := schedulingtest.NewHandle()
	src := schedulingtest.New[*datalayer.DCGMSource](t, hd, datalayer.DCGMSourceType, "gpus",
		fmt.Sprintf(`{"port": %d, "interval": "100ms"}`, exporter.srv.Listener.Addr().(*net.TCPAddr).Port))
	x := schedulingtest.New[*datalayer.DCGMExtractor](t, hd, datalayer.DCGMExtractorType, "", "")
	h.s.SetAttributePolls([]AttributePoll{{Source: src, Extractors: []scheduling.DataExtractor{x}, Interval: src.Interval().Std()}})
	h.rec.waitFor(t, "vllm-0", "GPU utilisation 0.37", func(m *eventsv1.PodMetrics) bool {
		v, ok := gpu(m)
		return ok && v == 0.37
	})
	exporter.setMetrics(dcgmPage("vllm-0", 80))
	h.rec.waitFor(t, "vllm-0", "GPU utilisation 0.8", func(m *eventsv1.PodMetrics) bool {
		v, ok := gpu(m)
		return ok && v == 0.8
	})
	// Fetched every 100 ms, not at every 10 ms metrics scrape (which
	// would make about 50 fetches).
	before := exporter.requests.Load()
	time.Sleep(500 * time.Millisecond)
	if n := exporter.requests.Load() - before; n > 10 || n < 1 {
		t.Errorf("%d exporter fetches in 500 ms at a 100 ms interval", n)
	}

	exporter.status.Store(http.StatusServiceUnavailable)
	eventually(t, 5*time.Second, "a failed attribute fetch counted", func() bool {
		n, _ := h.metric(t, "hermod_collector_scrape_errors_total", "kind", "attributes", "reason", "status")
		return n > 0
	})
	if v, ok := gpu(h.rec.waitFor(t, "vllm-0", "a scrape", func(*eventsv1.PodMetrics) bool { return true })); !ok || v != 0.8 {
		t.Errorf("while the exporter fails: %v %v, want the latest good 0.8", v, ok)
	}

	h.s.SetAttributePolls(nil)
	h.rec.waitFor(t, "vllm-0", "no GPU utilisation once the poll is gone", func(m *eventsv1.PodMetrics) bool {
		_, ok := gpu(m)
		return !ok
	})
}

func clusterPage(kv, queue float64, withQueue bool) string {
	page := fmt.Sprintf("# TYPE llm_d_epp_average_kv_cache_utilization gauge\nllm_d_epp_average_kv_cache_utilization %v\n", kv)
	if withQueue {
		page += fmt.Sprintf("# TYPE llm_d_epp_average_queue_size gauge\nllm_d_epp_average_queue_size %v\n", queue)
	}
	return page
}

// A cluster's pool averages are fetched where its metricsAddress and
// metricsPort labels say and published as the multicluster attributes; a
// page missing one of them updates the other and keeps the missing one's
// latest value, as upstream's extractor does.
func TestAttributePollsPublishClusterAverages(t *testing.T) {
	cluster := newPod(t, vllmBody(0, 0, 0, 0))
	exporter := newPod(t, clusterPage(0.4, 6, true))
	h := newHarness(t, Config{})
	ep := cluster.endpoint("pool", "cluster-a")
	addr := exporter.srv.Listener.Addr().(*net.TCPAddr)
	ep.Labels = map[string]string{datalayer.MetricsAddressLabel: addr.IP.String(), datalayer.MetricsPortLabel: fmt.Sprint(addr.Port)}
	h.s.SetEndpoints([]*registryv1.Endpoint{ep})

	hd := schedulingtest.NewHandle()
	src := schedulingtest.New[*datalayer.MultiClusterSource](t, hd, datalayer.MultiClusterMetricsSourceType, "clusters", `{"scheme": "http", "interval": "50ms"}`)
	x := schedulingtest.New[*datalayer.MultiClusterExtractor](t, hd, datalayer.MultiClusterExtractorType, "", "")
	h.s.SetAttributePolls([]AttributePoll{{Source: src, Extractors: []scheduling.DataExtractor{x}, Interval: src.Interval().Std()}})
	averages := func(kv, queue float64) func(*eventsv1.PodMetrics) bool {
		return func(m *eventsv1.PodMetrics) bool {
			a := m.GetAttributes()
			return a[datalayer.MultiClusterKVCacheUtilizationKey] == kv && a[datalayer.MultiClusterQueueSizeKey] == queue
		}
	}
	h.rec.waitFor(t, "cluster-a", "kv 0.4, queue 6", averages(0.4, 6))
	exporter.setMetrics(clusterPage(0.7, 0, false))
	h.rec.waitFor(t, "cluster-a", "kv 0.7, queue still 6", averages(0.7, 6))
}
