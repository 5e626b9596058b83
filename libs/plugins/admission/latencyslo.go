package admission

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/hermod/hermod/libs/plugins/predictedlatency"
	"github.com/hermod/hermod/libs/scheduling"
)

// LatencySLOAdmitterType is the llm-d router's latency-slo-admitter: a
// sheddable request (priority < 0) is rejected when no candidate is
// predicted to meet its SLOs, none is idle (nothing in flight) and none is
// cold (KV cache under 2% used, where predictions are unreliable). Other
// requests are always admitted.
const LatencySLOAdmitterType = "latency-slo-admitter"

// coldKVCache is the KV use under which an endpoint counts as cold.
const coldKVCache = 0.02

func init() {
	scheduling.Register(scheduling.Registration{Type: LatencySLOAdmitterType, New: newLatencySLO})
}

// LatencySLO is latency-slo-admitter.
type LatencySLO struct {
	scheduling.Named
	predictor scheduling.LatencyPredictor
}

func newLatencySLO(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
	if err := scheduling.DecodeParameters(raw, &struct{}{}, h); err != nil {
		return nil, err
	}
	lp, err := predictedlatency.Source(h)
	if err != nil {
		return nil, err
	}
	return &LatencySLO{Named: scheduling.Named{Type: LatencySLOAdmitterType, Name: name}, predictor: lp}, nil
}

// Admit implements scheduling.Admitter.
func (a *LatencySLO) Admit(ctx context.Context, cs *scheduling.CycleState, req *scheduling.Request, candidates []*scheduling.Endpoint) error {
	if req.Priority() >= 0 {
		return nil
	}
	preds := a.predictor.PredictLatency(ctx, cs, req, candidates)
	for _, e := range candidates {
		if pr, ok := preds.Get(e.Name); ok && (pr.MeetsSLO || pr.InFlight == 0) {
			return nil
		}
		if e.Metrics != nil && e.Metrics.KVCacheUsage < coldKVCache {
			return nil
		}
	}
	return &scheduling.Error{Kind: scheduling.KindShed, Msg: fmt.Sprintf("%s: no endpoint is predicted to meet the SLOs of a sheddable request, none is idle or cold", LatencySLOAdmitterType)}
}
