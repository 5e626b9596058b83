package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// TestPredictedLatency runs the recommended predicted-latency config on a
// fleet of one pod at full speed and one at a quarter, with two picker
// replicas: the model learns from the completions that the slow pod is
// slow (both replicas alike, from the same streams), routing moves to the
// fast pod, and every decision carries its predictions.
func TestPredictedLatency(t *testing.T) {
	cfg, err := filepath.Abs("../tools/loadgen/bench/configs/predicted-latency.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s := startStack(t, "--pods", "2", "--slow-pods", "1", "--slow-speed", "0.25", "--pickers", "2", "--speed", "10", "--config", cfg)
	ev := s.follow(t)
	model := s.state.Model
	fast, slow := s.state.Pods[0], s.state.Pods[1]
	request := func(i int) (string, string, bool) {
		stream := i%2 == 0
		return "/v1/completions", fmt.Sprintf(`{"model":%q,"prompt":"request %d: a few words about routing by predicted latency","max_tokens":32,"stream":%t}`, model, i, stream), stream
	}
	first := s.load(context.Background(), 40, 2, request, nil)
	for i, r := range first {
		if !r.ok() {
			t.Fatalf("request %d: %d %v %s", i, r.status, r.err, r.body)
		}
	}
	// both replicas fold every decision and completion: after one more
	// request (which fits what is pending) they hold one model
	var speeds [2]map[string][2]float64
	waitFor(t, 20*time.Second, "both replicas to fit the same model over every finished request", func() bool {
		if r := s.send(context.Background(), "/v1/completions", fmt.Sprintf(`{"model":%q,"prompt":"probe","max_tokens":2}`, model), false); !r.ok() {
			t.Fatalf("probe: %d %v %s", r.status, r.err, r.body)
		}
		time.Sleep(300 * time.Millisecond) // the fits run in the background
		for i := range speeds {
			m := s.projection(t, i).LatencyModel
			if m == nil || m.Samples < 40 {
				return false
			}
			speeds[i] = m.Speeds
		}
		return fmt.Sprint(speeds[0]) == fmt.Sprint(speeds[1])
	})
	f, sl := speeds[0][fast.Name], speeds[0][slow.Name]
	t.Logf("speed factors: %s %v, %s %v", fast.Name, f, slow.Name, sl)
	if sl[1] < 2.5*f[1] {
		t.Errorf("the pod at a quarter speed is predicted %.2fx slower per token, want about 4x", sl[1]/f[1])
	}
	served := map[string]int{}
	for _, r := range s.load(context.Background(), 30, 2, request, nil) {
		if !r.ok() {
			t.Fatalf("%d %v %s", r.status, r.err, r.body)
		}
		served[r.servedBy]++
		var d = ev.decision(r.requestID)
		waitFor(t, 5*time.Second, "the decision", func() bool { d = ev.decision(r.requestID); return d != nil })
		for _, e := range d.GetProfiles()[0].GetEndpoints() {
			if p := e.GetPrediction(); p.GetTtftSeconds() <= 0 || p.GetTpotSeconds() <= 0 {
				t.Fatalf("decision %s: no prediction for %s: %v", d.GetDecisionId(), e.GetName(), p)
			}
		}
	}
	if served[fast.Address] <= served[slow.Address] {
		t.Errorf("after learning, the fast pod served %d and the slow one %d", served[fast.Address], served[slow.Address])
	}
	t.Logf("served after learning: %v", served)
}
