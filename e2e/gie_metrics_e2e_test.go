package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// gieDashboardMetrics are the metric names the Gateway API Inference
// Extension's documented dashboards and alerts query (written from its
// metrics documentation): the per-request objective family, the pool
// gauges, the build info, the scheduler's, the prefix indexer's and the
// flow-control family.
var gieDashboardMetrics = []string{
	"inference_objective_request_total",
	"inference_objective_request_error_total",
	"inference_objective_request_duration_seconds",
	"inference_objective_request_ttft_seconds",
	"inference_objective_request_tpot_seconds",
	"inference_objective_input_tokens",
	"inference_objective_output_tokens",
	"inference_objective_prompt_cached_tokens",
	"inference_objective_running_requests",
	"inference_objective_normalized_time_per_output_token_seconds",
	"inference_objective_request_sizes",
	"inference_objective_response_sizes",
	"inference_pool_per_pod_queue_size",
	"inference_pool_average_kv_cache_utilization",
	"inference_pool_average_queue_size",
	"inference_pool_average_running_requests",
	"inference_pool_ready_pods",
	"inference_extension_info",
	"inference_extension_scheduler_e2e_duration_seconds",
	"inference_extension_scheduler_attempts_total",
	"inference_extension_plugin_duration_seconds",
	"inference_extension_prefix_indexer_size",
	"inference_extension_prefix_indexer_hit_ratio",
	"inference_extension_prefix_indexer_hit_bytes",
	"inference_extension_flow_control_request_queue_duration_seconds",
	"inference_extension_flow_control_request_enqueue_duration_seconds",
	"inference_extension_flow_control_dispatch_cycle_duration_seconds",
	"inference_extension_flow_control_queue_size",
	"inference_extension_flow_control_queue_bytes",
	"inference_extension_flow_control_pool_saturation",
}

// metricFamilies returns the names of the families a /metrics serves.
func metricFamilies(t *testing.T, url string) map[string]bool {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("%s: %v", url, err)
	}
	out := map[string]bool{}
	for name, mf := range mfs {
		if len(mf.GetMetric()) > 0 {
			out[name] = true
		}
	}
	return out
}

// Every metric GIE's dashboards query is served by the stack's gateway or
// picker once traffic has gone through: streamed and not, queued by flow
// control, one refused as malformed.
func TestGIEDashboardMetrics(t *testing.T) {
	flow := writeFile(t, t.TempDir(), "flow.yaml", "queueing: true\nmaxConcurrency: 2\ndefaultRequestTTL: 60s\n")
	s := startStack(t, "--pods", "2", "--speed", "20", "--gateway-args", "--flow-control,"+flow)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, r := range s.load(ctx, 16, 8, func(i int) (string, string, bool) { return mixedRequest(s.state.Model, i) }, nil) {
		if !r.ok() {
			t.Fatalf("request failed: %d %v %s", r.status, r.err, r.body)
		}
	}
	if r := s.send(ctx, "/v1/completions", fmt.Sprintf(`{"model":%q,"prompt":7}`, s.state.Model), false); r.status != http.StatusBadRequest {
		t.Fatalf("a malformed request: %d %s", r.status, r.body)
	}
	waitFor(t, 30*time.Second, "every GIE dashboard metric", func() bool {
		got := metricFamilies(t, "http://"+s.state.GatewayOps[0]+"/metrics") // not on the API address
		for name := range metricFamilies(t, "http://"+s.state.Pickers[0].Ops+"/metrics") {
			got[name] = true
		}
		var missing []string
		for _, name := range gieDashboardMetrics {
			if !got[name] {
				missing = append(missing, name)
			}
		}
		sort.Strings(missing)
		if len(missing) > 0 {
			t.Logf("not served yet: %s", strings.Join(missing, ", "))
		}
		return len(missing) == 0
	})
}
