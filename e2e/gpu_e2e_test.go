package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestGPUUtilizationSteersRouting runs the llm-d router's GPU config
// shape on the devstack: each simulated pod has a node of its own with a
// DCGM exporter DaemonSet's page on it, the collector scrapes it on each pod's node as the
// config's dcgm-data-source says and publishes the utilisation with the
// pod's metrics, and the picker's endpoint-attribute-filter keeps
// requests off a pod whose GPU is over 95% busy until it is not.
func TestGPUUtilizationSteersRouting(t *testing.T) {
	dcgmPort := freePorts(t, 1)
	cfg := writeFile(t, t.TempDir(), "gpu.yaml", fmt.Sprintf(`apiVersion: llm-d.ai/v1alpha1
kind: EndpointPickerConfig
plugins:
- type: dcgm-data-source
  name: dcgm-source
  parameters: {port: %d, useNodeAddress: true, interval: 100ms}
- type: dcgm-extractor
- type: endpoint-attribute-filter
  name: gpu-utilization-filter
  parameters:
    attribute: GPUUtilization/dcgm-extractor
    onMissing: Pass
    algorithm:
      type: threshold
      threshold: {operator: LessThan, value: 0.95}
- type: endpoint-attribute-scorer
  name: gpu-utilization-scorer
  parameters:
    attributeKey: GPUUtilization/dcgm-extractor
    algorithm:
      type: linear_lower_is_better
      normalization:
        fixedRange: {min: 0, max: 1}
- type: random-picker
- type: response-header-handler
dataLayer:
  sources:
  - pluginRef: dcgm-source
    extractors:
    - pluginRef: dcgm-extractor
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: gpu-utilization-filter
  - pluginRef: gpu-utilization-scorer
  - pluginRef: random-picker
`, dcgmPort))
	s := startStack(t, "--pods", "3", "--slow-pods", "0", "--speed", "10", "--config", cfg, "--dcgm-port", fmt.Sprint(dcgmPort))
	busy := s.state.Pods[0]
	setGPU := func(body string) {
		req, err := http.NewRequest(http.MethodPut, "http://"+busy.Address+"/sim/faults", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("PUT /sim/faults %s: %s", body, resp.Status)
		}
	}
	// onBusy sends n requests one after another and counts those the
	// busy pod served.
	onBusy := func(n int) int {
		hits, served := 0, map[string]int{}
		defer func() { t.Logf("served: %v", served) }()
		for i := range n {
			r := s.send(context.Background(), "/v1/completions", fmt.Sprintf(`{"model":%q,"prompt":"gpu %d","max_tokens":2}`, s.state.Model, i), false)
			if !r.ok() {
				t.Fatalf("request %d: %d %v %s", i, r.status, r.err, r.body)
			}
			served[r.servedBy]++
			if r.servedBy == busy.Address {
				hits++
			}
		}
		return hits
	}
	if hits := onBusy(30); hits == 0 {
		t.Fatalf("before its GPU was busy, %s served none of 30 requests over 3 pods", busy.Name)
	}
	setGPU(`{"gpu_utilization": 99}`)
	waitFor(t, 20*time.Second, "requests to keep off the pod whose GPU is 99% busy", func() bool { return onBusy(20) == 0 })
	setGPU(`{}`)
	waitFor(t, 20*time.Second, "the pod to serve again once its GPU is idle", func() bool { return onBusy(20) > 0 })
}
