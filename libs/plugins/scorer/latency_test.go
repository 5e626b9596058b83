package scorer_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/hermod/hermod/libs/plugins/predictedlatency/predictiontest"
	"github.com/hermod/hermod/libs/plugins/scorer"
	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/libs/scheduling/schedulingtest"
)

func latencyScores(t *testing.T, params string, set map[string]scheduling.Prediction, eps []*scheduling.Endpoint) string {
	t.Helper()
	p := predictiontest.New()
	p.By = set
	s := schedulingtest.New[*scorer.Latency](t, schedulingtest.NewHandle().Declare(p), scorer.LatencyType, "latency", params)
	scores := make([]float64, len(eps))
	s.Score(context.Background(), schedulingtest.CycleState(1), &scheduling.Request{}, eps, scores)
	for i := range scores {
		scores[i] = float64(int(scores[i]*100+0.5)) / 100
	}
	return fmt.Sprint(scores)
}

func TestLatencyScorer(t *testing.T) {
	eps := schedulingtest.Endpoints(3)
	a, b, c := eps[0].Name, eps[1].Name, eps[2].Name
	h := predictiontest.Headrooms
	meets := map[string]scheduling.Prediction{a: h(100, 10, 2), b: h(300, 10, 2), c: h(-50, 10, 2)}
	// only the endpoints meeting both SLOs score; least prefers the one
	// closest to its SLO (TPOT alike: the TTFT decides)
	if got := latencyScores(t, "", meets, eps); got != "[1 0 0]" {
		t.Errorf("least: %s", got)
	}
	if got := latencyScores(t, `{"headroomSelectionStrategy": "most"}`, meets, eps); got != "[0 1 0]" {
		t.Errorf("most: %s", got)
	}
	// every SLO missed: an idle endpoint alone
	if got := latencyScores(t, "", map[string]scheduling.Prediction{a: h(-10, 5, 3), b: h(-500, -5, 0), c: h(-20, 1, 1)}, eps); got != "[0 1 0]" {
		t.Errorf("idle preference: %s", got)
	}
	// none idle: the TPOT-only misses (b, c) before both (a); among them
	// b's TTFT is closer to its SLO (0.8 of the blend), c's TPOT nearer
	// to being met (0.2)
	if got := latencyScores(t, "", map[string]scheduling.Prediction{a: h(-10, -5, 3), b: h(20, -40, 1), c: h(30, -10, 1)}, eps); got != "[0 0.8 0.2]" {
		t.Errorf("deficit groups: %s", got)
	}
	// no predictions: KV use and queue
	eps[0].Metrics = &scheduling.Metrics{KVCacheUsage: 0.9, WaitingRequests: 4}
	eps[1].Metrics = &scheduling.Metrics{KVCacheUsage: 0.1, WaitingRequests: 0}
	eps[2].Metrics = &scheduling.Metrics{KVCacheUsage: 0.5, WaitingRequests: 2}
	if got := latencyScores(t, `{"compositePrefixWeight": 0}`, nil, eps); got != "[0.05 0.95 0.5]" {
		t.Errorf("composite: %s", got)
	}
	if _, err := schedulingtest.NewErr(schedulingtest.NewHandle().Declare(predictiontest.New()), scorer.LatencyType, "x", `{"headroomSelectionStrategy": "all"}`); err == nil || !strings.Contains(err.Error(), "headroomSelectionStrategy") {
		t.Errorf("a bad strategy: %v", err)
	}
}
