// Package admission holds the plugins that decide whether a request is
// served at all: utilization-detector, the pool's saturation detector (and
// a filter of the endpoints with room), and probabilistic-admitter, which
// sheds sheddable requests more often the more saturated the pool is.
package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/hermod/hermod/libs/scheduling"
)

// Registered plugin types.
const (
	UtilizationDetectorType = scheduling.TypeUtilizationDetector
	ProbabilisticType       = "probabilistic-admitter"
)

// Defaults shared by both plugins.
const (
	DefaultQueueDepthThreshold  = 5
	DefaultKVCacheUtilThreshold = 0.8
	DefaultStaleness            = 200 * time.Millisecond
	DefaultPower                = 5.0
	DefaultK                    = 300.0
)

func init() {
	scheduling.Register(scheduling.Registration{Type: UtilizationDetectorType, New: newUtilization})
	scheduling.Register(scheduling.Registration{Type: ProbabilisticType, New: newProbabilistic})
}

// thresholds are the per-endpoint limits both plugins measure load
// against: an endpoint at either is full.
type thresholds struct {
	queue int
	kv    float64
}

// load is an endpoint's saturation: the larger of its waiting queue over
// the queue threshold and its KV-cache usage over the KV threshold; an
// endpoint without metrics (or, with staleAfter > 0, with metrics older
// than that) counts as saturated (1).
func (t thresholds) load(e *scheduling.Endpoint, now time.Time, staleAfter time.Duration) float64 {
	m := e.Metrics
	if m == nil || (staleAfter > 0 && now.Sub(m.UpdatedAt) > staleAfter) {
		return 1
	}
	return math.Max(float64(m.WaitingRequests)/float64(t.queue), m.KVCacheUsage/t.kv)
}

// mean is the mean load of eps; no endpoint at all is saturated (1).
func (t thresholds) mean(eps []*scheduling.Endpoint, now time.Time, staleAfter time.Duration) float64 {
	if len(eps) == 0 {
		return 1
	}
	var sum float64
	for _, e := range eps {
		sum += t.load(e, now, staleAfter)
	}
	return sum / float64(len(eps))
}

// UtilizationParams are utilization-detector's parameters.
type UtilizationParams struct {
	QueueDepthThreshold       int                 `json:"queueDepthThreshold"`
	KVCacheUtilThreshold      float64             `json:"kvCacheUtilThreshold"`
	MetricsStalenessThreshold scheduling.Duration `json:"metricsStalenessThreshold"`
	Headroom                  float64             `json:"headroom"`
}

// Utilization is utilization-detector. As the saturation detector, the
// pool's saturation is the mean load of the candidates (see thresholds;
// stale metrics count as saturated). As a filter (when a profile names
// it), it keeps the endpoints with fresh metrics whose queue and KV usage
// are both below their thresholds raised by headroom; when none is, it
// keeps them all (fail open).
type Utilization struct {
	scheduling.Named
	params UtilizationParams
	limits thresholds
	now    func() time.Time
}

func newUtilization(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
	p, err := ParseUtilizationParams(raw, h)
	if err != nil {
		return nil, err
	}
	return &Utilization{Named: scheduling.Named{Type: UtilizationDetectorType, Name: name}, params: p,
		limits: thresholds{queue: p.QueueDepthThreshold, kv: p.KVCacheUtilThreshold}, now: h.Now}, nil
}

// ParseUtilizationParams reads and checks utilization-detector's
// parameters (h, which may be nil, hears the warnings).
func ParseUtilizationParams(raw json.RawMessage, h scheduling.Handle) (UtilizationParams, error) {
	p := UtilizationParams{QueueDepthThreshold: DefaultQueueDepthThreshold, KVCacheUtilThreshold: DefaultKVCacheUtilThreshold,
		MetricsStalenessThreshold: scheduling.Duration(DefaultStaleness)}
	if err := scheduling.DecodeParameters(raw, &p, h); err != nil {
		return UtilizationParams{}, err
	}
	switch {
	case p.QueueDepthThreshold <= 0:
		return UtilizationParams{}, scheduling.ParamErrorf("queueDepthThreshold", "must be positive (got %d)", p.QueueDepthThreshold)
	case !(p.KVCacheUtilThreshold > 0 && p.KVCacheUtilThreshold <= 1):
		return UtilizationParams{}, scheduling.ParamErrorf("kvCacheUtilThreshold", "must be in (0, 1] (got %v)", p.KVCacheUtilThreshold)
	case p.MetricsStalenessThreshold <= 0:
		return UtilizationParams{}, scheduling.ParamErrorf("metricsStalenessThreshold", "must be positive (got %s)", p.MetricsStalenessThreshold)
	case !(p.Headroom >= 0) || math.IsInf(p.Headroom, 0):
		return UtilizationParams{}, scheduling.ParamErrorf("headroom", "must be a non-negative number (got %v)", p.Headroom)
	}
	if p.Headroom > 1 && h != nil {
		h.Warn(fmt.Sprintf("headroom %v lets the filter keep endpoints more than twice past their thresholds", p.Headroom))
	}
	return p, nil
}

// Parameters implements scheduling.ParameterReporter.
func (u *Utilization) Parameters() any { return u.params }

// Saturation implements scheduling.SaturationDetector.
func (u *Utilization) Saturation(_ context.Context, candidates []*scheduling.Endpoint) float64 {
	return u.limits.mean(candidates, u.now(), u.params.MetricsStalenessThreshold.Std())
}

// ShedsLoad implements scheduling.LoadShedder: the filter removes the
// endpoints past their thresholds, and a request it leaves none is shed.
func (u *Utilization) ShedsLoad() {}

// Filter implements scheduling.Filter.
func (u *Utilization) Filter(_ context.Context, _ *scheduling.CycleState, _ *scheduling.Request, in, dst []*scheduling.Endpoint) []*scheduling.Endpoint {
	now, stale := u.now(), u.params.MetricsStalenessThreshold.Std()
	queueLimit := float64(u.params.QueueDepthThreshold) * (1 + u.params.Headroom)
	kvLimit := u.params.KVCacheUtilThreshold * (1 + u.params.Headroom)
	start := len(dst)
	for _, e := range in {
		m := e.Metrics
		if m == nil || now.Sub(m.UpdatedAt) > stale {
			continue
		}
		if float64(m.WaitingRequests) < queueLimit && m.KVCacheUsage < kvLimit {
			dst = append(dst, e)
		}
	}
	if len(dst) == start {
		return append(dst, in...)
	}
	return dst
}

// ProbabilisticParams are probabilistic-admitter's parameters.
type ProbabilisticParams struct {
	QueueDepthThreshold  int     `json:"queueDepthThreshold"`
	KVCacheUtilThreshold float64 `json:"kvCacheUtilThreshold"`
	Power                float64 `json:"power"`
	K                    float64 `json:"k"`
}

// Probabilistic is probabilistic-admitter: a sheddable request (priority
// < 0) is rejected with probability min(1, k * s^power), s the mean load
// of the candidates (metrics of any age; none counts as saturated).
// Requests of priority 0 or more are always admitted.
type Probabilistic struct {
	scheduling.Named
	params ProbabilisticParams
	limits thresholds
}

func newProbabilistic(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
	p := ProbabilisticParams{QueueDepthThreshold: DefaultQueueDepthThreshold, KVCacheUtilThreshold: DefaultKVCacheUtilThreshold,
		Power: DefaultPower, K: DefaultK}
	if err := scheduling.DecodeParameters(raw, &p, h); err != nil {
		return nil, err
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"queueDepthThreshold", float64(p.QueueDepthThreshold)}, {"kvCacheUtilThreshold", p.KVCacheUtilThreshold}, {"power", p.Power}, {"k", p.K}} {
		if !(f.v > 0) || math.IsInf(f.v, 0) {
			return nil, scheduling.ParamErrorf(f.name, "must be a positive number (got %v)", f.v)
		}
	}
	return &Probabilistic{Named: scheduling.Named{Type: ProbabilisticType, Name: name}, params: p,
		limits: thresholds{queue: p.QueueDepthThreshold, kv: p.KVCacheUtilThreshold}}, nil
}

// Parameters implements scheduling.ParameterReporter.
func (p *Probabilistic) Parameters() any { return p.params }

// Admit implements scheduling.Admitter.
func (p *Probabilistic) Admit(_ context.Context, cs *scheduling.CycleState, req *scheduling.Request, candidates []*scheduling.Endpoint) error {
	if req.Priority() >= 0 || len(candidates) == 0 {
		return nil
	}
	sat := p.limits.mean(candidates, time.Time{}, 0)
	prob := p.RejectProbability(sat)
	if cs.Rand().Float64() < prob {
		return &scheduling.Error{Kind: scheduling.KindShed, Msg: fmt.Sprintf("%s: rejected, saturation %.3f, probability %.3f", ProbabilisticType, sat, prob)}
	}
	return nil
}

// RejectProbability is the chance a sheddable request is rejected at
// saturation s: min(1, k * s^power).
func (p *Probabilistic) RejectProbability(s float64) float64 {
	return math.Min(1, p.params.K*math.Pow(s, p.params.Power))
}
