package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The router's EndpointPickerConfig as the gateway's --flow-control
// file, across real processes: with the concurrency detector a pool of
// two endpoints holds two requests, the next waits in its band, one past
// the band's bound gets 429 rejected-saturated at once, and the waiting
// one is served when a slot frees; a pool with no endpoint answers 503
// rejected-no-endpoints when the wait runs out.
func TestFlowControlFromAnEndpointPickerConfig(t *testing.T) {
	const head = "apiVersion: llm-d.ai/v1alpha1\nkind: EndpointPickerConfig\nfeatureGates: [flowControl]\n"
	dir := t.TempDir()
	epp := writeFile(t, dir, "epp.yaml", head+`plugins:
- {type: concurrency-detector, parameters: {maxConcurrency: 1}}
- type: queue-scorer
- type: max-score-picker
schedulingProfiles:
- name: default
  plugins: [{pluginRef: queue-scorer}, {pluginRef: max-score-picker}]
flowControl:
  defaultRequestTTL: 60s
  priorityBands: [{priority: 0, maxRequests: 1}]
  saturationDetector: {pluginRef: concurrency-detector}
`)
	s := startStack(t, "--pods", "2", "--gateway-args", "--flow-control,"+epp)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	post := func(maxTokens int, stream bool) (*http.Response, error) {
		body := fmt.Sprintf(`{"model":%q,"prompt":"tell me a long story","max_tokens":%d,"stream":%t}`, s.state.Model, maxTokens, stream)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url("/v1/completions"), strings.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		return http.DefaultClient.Do(req)
	}
	// two long streams take the pool's two slots
	for i := range 2 {
		resp, err := post(400, true)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = resp.Body.Close() })
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("stream %d: %d", i, resp.StatusCode)
		}
		if _, err := readFirstEvent(resp.Body); err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
		go func() { _, _ = io.Copy(io.Discard, resp.Body) }()
	}
	waiting := make(chan int, 1)
	go func() {
		resp, err := post(4, false)
		if err != nil {
			waiting <- 0
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		waiting <- resp.StatusCode
	}()
	// once it waits, band 0 is full
	waitFor(t, 20*time.Second, "a request waiting in band 0", func() bool {
		return metricValue(t, "http://"+s.state.GatewayOps[0]+"/metrics", "inference_extension_flow_control_queue_size") == 1
	})
	start := time.Now()
	resp, err := post(4, false)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("x-llm-d-request-dropped-reason") != "rejected-saturated" {
		t.Fatalf("past the band's bound: %d %q %s", resp.StatusCode, resp.Header.Get("x-llm-d-request-dropped-reason"), b)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("a full band answered after %s, not at once", d)
	}
	select {
	case code := <-waiting:
		if code != http.StatusOK {
			t.Fatalf("the waiting request: %d", code)
		}
	case <-ctx.Done():
		t.Fatal("the waiting request was never served")
	}

	empty := writeFile(t, dir, "empty.yaml", head+"flowControl: {defaultRequestTTL: 1s}\n")
	s0 := startStack(t, "--pods", "0", "--gateway-args", "--flow-control,"+empty)
	r := s0.send(ctx, "/v1/completions", fmt.Sprintf(`{"model":%q,"prompt":"x","max_tokens":4}`, s0.state.Model), false)
	if r.status != http.StatusServiceUnavailable || !strings.Contains(r.body, "no endpoints") {
		t.Fatalf("a pool with no endpoint: %d %s", r.status, r.body)
	}
}
