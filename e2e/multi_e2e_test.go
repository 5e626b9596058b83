package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hermod/hermod/libs/inflight"
	"github.com/hermod/hermod/testkit/redistest"
	"github.com/hermod/hermod/tools/loadgen/bench"
)

// Two gateways, each with its own picker, route through the shared
// in-flight counts in Valkey (devstack --valkey): every request is served,
// every pick went through the server, and the counts return to zero once
// the requests are done.
func TestValkeyGlobalViewAcrossGateways(t *testing.T) {
	cfg, err := bench.Config("valkey-least-request")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "valkey.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startStack(t, "--pods", "3", "--slow-pods", "0", "--pickers", "2", "--gateways", "2", "--pair-gateways", "--valkey", "--speed", "10", "--config", path)
	if len(s.state.Gateways) != 2 || s.state.Valkey == "" {
		t.Fatalf("state: gateways %v, valkey %q", s.state.Gateways, s.state.Valkey)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			gw := *s
			gw.state.Gateway = s.state.Gateways[i%2]
			stream := i%3 == 0
			r := gw.send(context.Background(), "/v1/completions", fmt.Sprintf(`{"model":%q,"prompt":"request %d","max_tokens":8,"stream":%t}`, s.state.Model, i, stream), stream)
			if !r.ok() {
				errs <- fmt.Errorf("request %d via %s: %d %w %s", i, gw.state.Gateway, r.status, r.err, r.body)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, p := range s.state.Pickers {
		if n := metricValue(t, "http://"+p.Ops+"/metrics", "hermod_picker_inflight_fallback_total"); n != 0 {
			t.Fatalf("%s picked %v times without the server", p.Name, n)
		}
	}
	c := redistest.Connect(t, "redis://"+s.state.Valkey)
	store := inflight.New(c, s.state.Pool, 0)
	deadline := time.Now().Add(10 * time.Second)
	for {
		counts, err := store.Counts(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		total := int64(0)
		for _, n := range counts {
			total += n
		}
		leases, _ := store.Leases(context.Background())
		if len(counts) == 3 && total == 0 && leases == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("in-flight counts %v, %d leases after every request ended", counts, leases)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
