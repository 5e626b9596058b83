package predictedlatency

import (
	"fmt"

	"github.com/hermod/hermod/libs/scheduling"
)

// Source is the latency predictor a consumer (latency-scorer,
// slo-headroom-tier-filter, latency-slo-admitter) reads: the first one
// declared before it (a predicted-latency-producer or -scorer), else a
// predicted-latency-producer with its defaults, shared by every consumer
// that names none.
func Source(h scheduling.Handle) (scheduling.LatencyPredictor, error) {
	for _, p := range h.Earlier() {
		if lp, ok := p.(scheduling.LatencyPredictor); ok {
			return lp, nil
		}
	}
	p, err := h.DefaultPlugin(ProducerType)
	if err != nil {
		return nil, fmt.Errorf("the latency predictor (%s): %w", ProducerType, err)
	}
	lp, ok := p.(scheduling.LatencyPredictor)
	if !ok {
		return nil, fmt.Errorf("%s (type %s) predicts no latency", p.TypedName().Name, p.TypedName().Type)
	}
	return lp, nil
}
