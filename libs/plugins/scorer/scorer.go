// Package scorer holds the stateless scorers that read endpoint metrics or
// request headers: queue-scorer, running-requests-size-scorer,
// kv-cache-utilization-scorer, load-aware-scorer and lora-affinity-scorer
// (session-affinity-scorer is in package session), and the first two's
// multi-cluster variants, multicluster-queue-scorer and
// multicluster-kv-cache-utilization-scorer. Endpoints without metrics yet
// count as idle; clusters without their averages score 0.
package scorer

import (
	"context"
	"encoding/json"
	"math"
	"slices"

	"github.com/hermod/hermod/libs/scheduling"
)

// Registered plugin types.
const (
	QueueType           = "queue-scorer"
	RunningRequestsType = "running-requests-size-scorer"
	KVCacheType         = "kv-cache-utilization-scorer"
	LoadAwareType       = "load-aware-scorer"
	LoRAAffinityType    = "lora-affinity-scorer"
)

// DefaultLoadThreshold is load-aware-scorer's default threshold.
const DefaultLoadThreshold = 128

func init() {
	scheduling.Register(scheduling.Registration{Type: QueueType, New: noParams(QueueType, func(n scheduling.Named) scheduling.Plugin {
		return &MinMax{Named: n, value: func(e *scheduling.Endpoint) (float64, bool) { return float64(metricsOf(e).WaitingRequests), true }}
	})})
	scheduling.Register(scheduling.Registration{Type: RunningRequestsType, New: noParams(RunningRequestsType, func(n scheduling.Named) scheduling.Plugin {
		return &MinMax{Named: n, value: func(e *scheduling.Endpoint) (float64, bool) { return float64(metricsOf(e).RunningRequests), true }}
	})})
	scheduling.Register(scheduling.Registration{Type: KVCacheType, New: noParams(KVCacheType, func(n scheduling.Named) scheduling.Plugin {
		return &KVCache{Named: n, usage: func(e *scheduling.Endpoint) (float64, bool) { return metricsOf(e).KVCacheUsage, true }}
	})})
	scheduling.Register(scheduling.Registration{Type: LoRAAffinityType, New: noParams(LoRAAffinityType, func(n scheduling.Named) scheduling.Plugin {
		return &LoRAAffinity{n}
	})})
	scheduling.Register(scheduling.Registration{Type: LoadAwareType, New: newLoadAware})
}

func noParams(typ string, mk func(scheduling.Named) scheduling.Plugin) scheduling.Factory {
	return func(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
		if err := scheduling.DecodeParameters(raw, &struct{}{}, h); err != nil {
			return nil, err
		}
		return mk(scheduling.Named{Type: typ, Name: name}), nil
	}
}

var idle = &scheduling.Metrics{}

func metricsOf(e *scheduling.Endpoint) *scheduling.Metrics {
	if e.Metrics == nil {
		return idle
	}
	return e.Metrics
}

// MinMax scores (max - v)/(max - min) over the candidates for a metric v
// (waiting requests for queue-scorer, running requests for
// running-requests-size-scorer, a cluster's average queue for
// multicluster-queue-scorer); all equal scores 1.0. A candidate without
// the metric scores 0 and does not count in the range.
type MinMax struct {
	scheduling.Named
	value func(*scheduling.Endpoint) (float64, bool)
}

// Score implements scheduling.Scorer.
func (s *MinMax) Score(_ context.Context, _ *scheduling.CycleState, _ *scheduling.Request, eps []*scheduling.Endpoint, scores []float64) {
	lo, hi, found := math.Inf(1), math.Inf(-1), false
	for _, e := range eps {
		if v, ok := s.value(e); ok {
			lo, hi, found = min(lo, v), max(hi, v), true
		}
	}
	if !found {
		return
	}
	span := hi - lo
	for i, e := range eps {
		v, ok := s.value(e)
		switch {
		case !ok:
			scores[i] = 0
		case span == 0:
			scores[i] = 1
		default:
			scores[i] = (hi - v) / span
		}
	}
}

// KVCache scores 1 - KV-cache usage (an endpoint's, or a cluster's
// average for multicluster-kv-cache-utilization-scorer); a candidate
// without it scores 0.
type KVCache struct {
	scheduling.Named
	usage func(*scheduling.Endpoint) (float64, bool)
}

// Score implements scheduling.Scorer.
func (s *KVCache) Score(_ context.Context, _ *scheduling.CycleState, _ *scheduling.Request, eps []*scheduling.Endpoint, scores []float64) {
	for i, e := range eps {
		if u, ok := s.usage(e); ok {
			scores[i] = 1 - u
		} else {
			scores[i] = 0
		}
	}
}

// LoadAwareParams are load-aware-scorer's parameters.
type LoadAwareParams struct {
	// Threshold is the queue length counted as overload (default 128;
	// values <= 0 mean the default).
	Threshold int `json:"threshold"`
}

// LoadAware scores 0.5 for an empty queue and 0.5 x (1 - min(w, T)/T) for
// w waiting requests: lightly loaded pods stay close together rather than
// being spread over the whole [0, 1] range.
type LoadAware struct {
	scheduling.Named
	params LoadAwareParams
}

func newLoadAware(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
	p := LoadAwareParams{Threshold: DefaultLoadThreshold}
	if err := scheduling.DecodeParameters(raw, &p, h); err != nil {
		return nil, err
	}
	if p.Threshold <= 0 {
		h.Warn("parameters.threshold: must be positive; using the default 128")
		p.Threshold = DefaultLoadThreshold
	}
	return &LoadAware{Named: scheduling.Named{Type: LoadAwareType, Name: name}, params: p}, nil
}

// Parameters implements scheduling.ParameterReporter.
func (s *LoadAware) Parameters() any { return s.params }

// Score implements scheduling.Scorer.
func (s *LoadAware) Score(_ context.Context, _ *scheduling.CycleState, _ *scheduling.Request, eps []*scheduling.Endpoint, scores []float64) {
	t := s.params.Threshold
	for i, e := range eps {
		w := metricsOf(e).WaitingRequests
		if w <= 0 {
			scores[i] = 0.5
			continue
		}
		scores[i] = 0.5 * (1 - float64(min(w, t))/float64(t))
	}
}

// LoRAAffinity prefers endpoints where the request's adapter already runs
// (1.0), then endpoints with a free adapter slot (running + waiting
// adapters < max_lora: 0.8), then endpoints where it waits to load (0.6);
// others score 0. Base-model requests score 1.0 everywhere.
type LoRAAffinity struct{ scheduling.Named }

// Score implements scheduling.Scorer.
func (LoRAAffinity) Score(_ context.Context, _ *scheduling.CycleState, req *scheduling.Request, eps []*scheduling.Endpoint, scores []float64) {
	for i, e := range eps {
		scores[i] = LoRAScore(req.Adapter, metricsOf(e))
	}
}

// LoRAScore is lora-affinity-scorer's score of one endpoint.
func LoRAScore(adapter string, m *scheduling.Metrics) float64 {
	switch {
	case adapter == "":
		return 1
	case slices.Contains(m.RunningLoRAs, adapter):
		return 1
	case len(m.RunningLoRAs)+len(m.WaitingLoRAs) < m.MaxLoRAs:
		return 0.8
	case slices.Contains(m.WaitingLoRAs, adapter):
		return 0.6
	}
	return 0
}
