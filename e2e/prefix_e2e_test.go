package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// preciseConfig routes by the indexer's view of the pods' KV caches, with
// queue length as a tie-breaker.
const preciseConfig = `apiVersion: inference.networking.x-k8s.io/v1alpha1
kind: EndpointPickerConfig
plugins:
- type: precise-prefix-cache-scorer
  parameters:
    tokenProcessorConfig: {blockSize: 16}
    indexerConfig:
      tokenizersPoolConfig: {modelName: builtin}
- type: queue-scorer
- type: max-score-picker
  parameters: {maxNumOfEndpoints: 2}
- type: response-header-handler
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: precise-prefix-cache-scorer
    weight: 3
  - pluginRef: queue-scorer
  - pluginRef: max-score-picker
`

// The whole path of precise prefix routing with real processes: the pods
// publish KV events, the indexer ingests them, the pickers ask it, and
// requests sharing a long prefix follow the pod that holds it. Then the
// indexer is killed: routing fails open and no request fails.
func TestPrecisePrefixRoutingAndIndexerLoss(t *testing.T) {
	path := filepath.Join(t.TempDir(), "precise.yaml")
	if err := os.WriteFile(path, []byte(preciseConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	// the indexer killed below stays down: routing goes on without it
	s := startStack(t, "--pods", "4", "--slow-pods", "0", "--pickers", "2", "--speed", "10", "--config", path, "--no-restart", "indexer")
	ctx := context.Background()
	system := strings.Repeat("You are the support assistant of a large company; answer precisely and cite the manual. ", 12)
	chat := func(i int, stream bool) string {
		return fmt.Sprintf(`{"model":%q,"messages":[{"role":"system","content":%q},{"role":"user","content":"question %d"}],"max_tokens":4,"stream":%t}`, s.state.Model, system, i, stream)
	}
	first := s.send(ctx, "/v1/chat/completions", chat(0, false), false)
	if !first.ok() {
		t.Fatalf("first request: %d %v %s", first.status, first.err, first.body)
	}
	holder := first.servedBy
	// the pod's BlockStored events reach the index within moments
	waitIndexed(t, s)
	for i := 1; i <= 12; i++ {
		r := s.send(ctx, "/v1/chat/completions", chat(i, i%2 == 0), i%2 == 0)
		if !r.ok() {
			t.Fatalf("request %d: %d %v %s", i, r.status, r.err, r.body)
		}
		if r.servedBy != holder {
			t.Fatalf("request %d sharing the prefix went to %s, not %s which holds it", i, r.servedBy, holder)
		}
	}

	if err := syscall.Kill(s.state.PIDs["indexer"], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for i := range 60 {
		path, body, stream := mixedRequest(s.state.Model, i)
		if i%3 == 0 {
			path, body, stream = "/v1/chat/completions", chat(100+i, false), false
		}
		if r := s.send(ctx, path, body, stream); !r.ok() {
			t.Fatalf("request %d without the indexer: %d %v %s", i, r.status, r.err, r.body)
		}
	}
	if n := metricValue(t, "http://"+s.state.Pickers[0].Ops+"/metrics", "hermod_picker_indexer_fail_open_total") + metricValue(t, "http://"+s.state.Pickers[1].Ops+"/metrics", "hermod_picker_indexer_fail_open_total"); n == 0 {
		t.Fatal("the pickers never failed open without the indexer")
	}
}

// waitIndexed waits until the indexer holds some block.
func waitIndexed(t *testing.T, s *devstack) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := http.Get("http://" + s.state.Indexer.Ops + "/debug/index")
		if err == nil {
			var st struct {
				Keys int `json:"keys"`
			}
			err = json.NewDecoder(resp.Body).Decode(&st)
			_ = resp.Body.Close()
			if err == nil && st.Keys > 0 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the indexer holds no block 15s after a request (last error %v)", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// metricValue sums the samples of a metric family in a Prometheus text
// exposition (0 when absent).
func metricValue(t *testing.T, url, name string) float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, line := range strings.Split(string(b), "\n") {
		rest, ok := strings.CutPrefix(line, name)
		if !ok || (rest != "" && rest[0] != ' ' && rest[0] != '{') {
			continue
		}
		fields := strings.Fields(rest[strings.LastIndexByte(rest, '}')+1:])
		if len(fields) > 0 {
			if v, err := strconv.ParseFloat(fields[0], 64); err == nil {
				sum += v
			}
		}
	}
	return sum
}
