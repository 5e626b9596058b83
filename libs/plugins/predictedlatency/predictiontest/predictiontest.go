// Package predictiontest is a latency predictor whose predictions are
// given, for the tests of the plugins that read predictions.
package predictiontest

import (
	"context"
	"time"

	"github.com/hermod/hermod/libs/scheduling"
)

// Predictor is a scheduling.LatencyPredictor answering By.
type Predictor struct {
	scheduling.Named
	By map[string]scheduling.Prediction
}

// New returns a predictor declared as predicted-latency-producer.
func New() *Predictor {
	return &Predictor{Named: scheduling.Named{Type: "predicted-latency-producer", Name: "predictor"}, By: map[string]scheduling.Prediction{}}
}

// PredictLatency implements scheduling.LatencyPredictor.
func (p *Predictor) PredictLatency(_ context.Context, _ *scheduling.CycleState, _ *scheduling.Request, eps []*scheduling.Endpoint) *scheduling.Predictions {
	out := &scheduling.Predictions{}
	for _, e := range eps {
		if pr, ok := p.By[e.Name]; ok {
			out.Set(e.Name, pr)
		}
	}
	return out
}

// Headrooms is a streamed request's prediction with SLOs of 1 s TTFT and
// 100 ms TPOT whose headrooms are ttft and tpot milliseconds.
func Headrooms(ttftMs, tpotMs int, inFlight int) scheduling.Prediction {
	ms := func(v int) time.Duration { return time.Duration(v) * time.Millisecond }
	p := scheduling.Prediction{TTFTSLO: time.Second, TPOTSLO: 100 * time.Millisecond, TPOTCounts: true, InFlight: inFlight}
	p.TTFT, p.TPOT = p.TTFTSLO-ms(ttftMs), p.TPOTSLO-ms(tpotMs)
	p.TTFTHeadroom, p.TPOTHeadroom = ms(ttftMs), ms(tpotMs)
	p.MeetsSLO = ttftMs >= 0 && tpotMs >= 0
	return p
}
