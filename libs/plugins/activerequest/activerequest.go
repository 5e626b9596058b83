// Package activerequest holds active-request-scorer, which prefers endpoints
// with fewer in-flight requests.
package activerequest

import (
	"context"
	"encoding/json"
	"time"

	"github.com/hermod/hermod/libs/plugins/flight"
	"github.com/hermod/hermod/libs/plugins/inflightload"
	"github.com/hermod/hermod/libs/scheduling"
)

// Tracker counts the in-flight requests of every endpoint, keyed by
// decision id.
type Tracker = flight.Tracker[uint64, struct{}, struct{}]

// Type is the registered plugin type.
const Type = "active-request-scorer"

// Defaults.
const (
	DefaultRequestTimeout = 2 * time.Minute
	DefaultMaxBusyScore   = 1.0
)

func init() {
	scheduling.Register(scheduling.Registration{Type: Type, New: New})
}

// Params are active-request-scorer's parameters.
type Params struct {
	// RequestTimeout is how long a request counts as in flight without a
	// completion (the engine is assumed to have dropped it).
	RequestTimeout scheduling.Duration `json:"requestTimeout"`
	// IdleThreshold is the in-flight count up to which an endpoint is idle
	// (score 1.0).
	IdleThreshold int `json:"idleThreshold"`
	// MaxBusyScore caps the score of busy endpoints (0..1).
	MaxBusyScore float64 `json:"maxBusyScore"`
	// InFlightLoadProducerName, when set, names the producer whose
	// in-flight requests are counted (llm-d router v0.9+) instead of the
	// scorer's own count.
	InFlightLoadProducerName string `json:"inFlightLoadProducerName,omitempty"`
}

// Scorer scores c <= idleThreshold as 1.0 and otherwise
// (m - c)/m x maxBusyScore, where c is the endpoint's in-flight count and m
// the largest count among the candidates. A request counts +1 on each
// profile's primary target when it is scheduled and -1 when it completes
// or times out.
type Scorer struct {
	scheduling.Named
	params  Params
	tracker *Tracker
	load    scheduling.InFlightLoader // set: counts come from it
}

// New builds an active-request-scorer.
func New(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
	p := Params{RequestTimeout: scheduling.Duration(DefaultRequestTimeout), MaxBusyScore: DefaultMaxBusyScore}
	if err := scheduling.DecodeParameters(raw, &p, h); err != nil {
		return nil, err
	}
	if p.RequestTimeout <= 0 {
		return nil, scheduling.ParamErrorf("requestTimeout", "must be positive (got %s)", p.RequestTimeout.Std())
	}
	if p.IdleThreshold < 0 {
		return nil, scheduling.ParamErrorf("idleThreshold", "must not be negative (got %d)", p.IdleThreshold)
	}
	if p.MaxBusyScore < 0 || p.MaxBusyScore > 1 {
		return nil, scheduling.ParamErrorf("maxBusyScore", "must be between 0 and 1 (got %v)", p.MaxBusyScore)
	}
	sc := &Scorer{
		Named:   scheduling.Named{Type: Type, Name: name},
		params:  p,
		tracker: flight.NewTracker[uint64, struct{}, struct{}](p.RequestTimeout.Std(), h.Now),
	}
	if p.InFlightLoadProducerName != "" {
		l, err := inflightload.Loader(h, p.InFlightLoadProducerName)
		if err != nil {
			return nil, err
		}
		sc.load = l
	}
	return sc, nil
}

// Parameters implements scheduling.ParameterReporter.
func (s *Scorer) Parameters() any { return s.params }

// Tracker returns the scorer's in-flight tracker, keyed by decision id.
func (s *Scorer) Tracker() *Tracker { return s.tracker }

// Score implements scheduling.Scorer.
func (s *Scorer) Score(_ context.Context, _ *scheduling.CycleState, _ *scheduling.Request, eps []*scheduling.Endpoint, scores []float64) {
	var counts []float64
	if s.load != nil {
		for i, e := range eps {
			scores[i] = float64(s.load.InFlightLoad(e).Requests)
		}
		counts = scores
	} else {
		counts = s.tracker.Counts(eps, scores)
	}
	maxCount := 0.0
	for _, c := range counts {
		maxCount = max(maxCount, c)
	}
	idle := float64(s.params.IdleThreshold)
	for i, c := range counts {
		if c <= idle {
			scores[i] = 1
		} else {
			scores[i] = (maxCount - c) / maxCount * s.params.MaxBusyScore
		}
	}
}

// PreRequest implements scheduling.PreRequest: the decision puts one
// request in flight on the primary target of every profile that picked one
// (recorded as an effect, applied by ApplyEffect).
func (s *Scorer) PreRequest(_ context.Context, _ *scheduling.CycleState, _ *scheduling.Request, res *scheduling.Result) {
	if s.load != nil {
		return // the producer counts it
	}
	var buf [4]string
	names := buf[:0]
	for _, pr := range res.Profiles {
		if t, ok := pr.Target(); ok && pr.Err == nil {
			names = append(names, t.Endpoint.Name)
		}
	}
	res.RecordEffect(s, names, nil, 0)
}

// ApplyEffect implements scheduling.Projection: +1 on each endpoint of the
// effect under the decision's id, from the decision's time on.
func (s *Scorer) ApplyEffect(decisionID uint64, at time.Time, e *scheduling.Effect) {
	if at.IsZero() {
		s.tracker.Start(decisionID, e.Endpoints)
		return
	}
	s.tracker.StartAt(decisionID, e.Endpoints, at)
}

// ResponseComplete implements scheduling.ResponseComplete: the decision the
// response names is no longer in flight.
func (s *Scorer) ResponseComplete(_ context.Context, resp *scheduling.Response) {
	s.tracker.Done(resp.DecisionID)
}

// StateRetention implements scheduling.StateRetainer: a request counts for
// at most the request timeout.
func (s *Scorer) StateRetention() time.Duration { return s.params.RequestTimeout.Std() }

// InheritState implements scheduling.StateInheritor: the in-flight requests
// of the previous configuration stay counted, under this one's timeout.
func (s *Scorer) InheritState(prev scheduling.Plugin) bool {
	p, ok := prev.(*Scorer)
	if !ok {
		return false
	}
	p.tracker.SetTimeout(s.params.RequestTimeout.Std())
	s.tracker = p.tracker
	return true
}
