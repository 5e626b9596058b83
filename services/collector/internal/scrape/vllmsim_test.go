package scrape

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	registryv1 "github.com/hermod/hermod/libs/api/hermod/registry/v1"
)

// vllmSimBinary returns the vllm-sim binary: $HERMOD_VLLM_SIM, or bin/ of
// the repository (make build).
func vllmSimBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: runs the vllm-sim binary (skipped with -short)")
	}
	path := os.Getenv("HERMOD_VLLM_SIM")
	if path == "" {
		path = filepath.Join("..", "..", "..", "..", "bin", "vllm-sim")
	}
	if _, err := os.Stat(path); err != nil {
		t.Skipf("no vllm-sim binary at %s (make build, or set HERMOD_VLLM_SIM): %v", path, err)
	}
	return path
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}

// TestVLLMSim scrapes a real vllm-sim process: its metrics and models, the
// counters after a request, and the failures after it stops.
func TestVLLMSim(t *testing.T) {
	bin := vllmSimBinary(t)
	port := freePort(t)
	cmd := exec.Command(bin, "serve", "simmodel", "--host", "127.0.0.1", "--port", fmt.Sprint(port),
		"--enable-lora", "--lora-modules", "sql-lora=/adapters/sql", "--num-gpu-blocks-override", "1024", "--max-model-len", "4096", "--speed", "10")
	cmd.Stdout, cmd.Stderr = t.Output(), t.Output()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			_ = cmd.Process.Signal(syscall.SIGTERM)
			_ = cmd.Wait()
		}
	}
	t.Cleanup(stop)
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	eventually(t, 10*time.Second, "vllm-sim listening", func() bool {
		resp, err := http.Get(base + "/v1/models")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})

	h := newHarness(t, Config{Interval: 20 * time.Millisecond})
	h.s.SetEndpoints([]*registryv1.Endpoint{{Name: "sim-0", Pool: "sims", Address: "127.0.0.1", Port: int32(port)}})
	got := h.rec.waitFor(t, "sim-0", "metrics and models", func(m *eventsv1.PodMetrics) bool {
		return m.GetEngine() == "vllm" && len(m.GetServedModels()) == 2
	})
	if got.GetBlockSize() != 16 || got.GetNumGpuBlocks() != 1024 || got.GetMaxLora() != 1 ||
		!slices.Equal(got.GetServedModels(), []string{"simmodel", "sql-lora"}) || got.GetError() != "" {
		t.Errorf("idle vllm-sim: %v", got)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/completions",
		strings.NewReader(`{"model":"sql-lora","prompt":"a prompt of a few tokens for the simulator","max_tokens":8}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("completion: %s", resp.Status)
	}
	// A scrape is not a snapshot (the registry gathers its counters one by
	// one, concurrently), so one may see the request finished and its last
	// token not yet counted: wait until every counter has it.
	h.rec.waitFor(t, "sim-0", "the request counted", func(m *eventsv1.PodMetrics) bool {
		return m.GetRequestSuccessTotal() == 1 && m.GetGenerationTokensTotal() == 8 &&
			m.GetPromptTokensTotal() > 0 && m.GetPrefixCacheQueriesTotal() == m.GetPromptTokensTotal()
	})

	stop()
	got = h.rec.waitFor(t, "sim-0", "failures", func(m *eventsv1.PodMetrics) bool { return m.GetConsecutiveFailures() >= 2 })
	if got.GetRequestSuccessTotal() != 1 || got.GetLastSuccess() == nil || !strings.Contains(got.GetError(), "connection refused") {
		t.Errorf("stopped vllm-sim: %v", got)
	}
	http.DefaultClient.CloseIdleConnections()
}
