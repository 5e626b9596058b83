package cli

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
)

// An audit line shows why the target won: its scores, and what the latency
// predictor forecast for it and for the runner-up.
func TestDecisionLineShowsPredictions(t *testing.T) {
	d := &eventsv1.RoutingDecision{
		RequestId: "req-1", PrimaryName: "pod-0", PrimaryEndpoint: "10.0.0.1:8000", Time: timestamppb.New(time.Unix(1e9, 0)),
		Profiles: []*eventsv1.ProfileDecision{{
			Role:    eventsv1.ProfileRole_PROFILE_ROLE_PRIMARY,
			Scorers: []*eventsv1.Scorer{{Name: "predicted-latency-scorer", Weight: 1}},
			Endpoints: []*eventsv1.EndpointScores{
				{Name: "pod-1", Scores: []float64{0.4}, Total: 0.4, Prediction: &eventsv1.LatencyPrediction{TtftSeconds: 0.25, TpotSeconds: 0.02, TtftHeadroomSeconds: -0.05}},
				{Name: "pod-0", Scores: []float64{1}, Total: 1, Prediction: &eventsv1.LatencyPrediction{TtftSeconds: 0.1, TpotSeconds: 0.01, TtftHeadroomSeconds: 0.1, MeetsSlo: true}},
			},
		}},
	}
	got := decisionLine(d)
	for _, want := range []string{"-> pod-0", "predicted-latency-scorer=1.00 [ttft 100.0ms tpot 10.0ms ttft-headroom 100.0ms]", "next pod-1 0.40 [ttft 250.0ms tpot 20.0ms ttft-headroom -50.0ms misses SLO]"} {
		if !strings.Contains(got, want) {
			t.Errorf("audit line %q lacks %q", got, want)
		}
	}
}
