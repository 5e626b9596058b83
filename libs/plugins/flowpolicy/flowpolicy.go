// Package flowpolicy holds the flow-control policies an
// EndpointPickerConfig declares (the llm-d router's fairness, ordering,
// usage-limit and eviction policy types). The picker registers them so
// that a config naming them loads; the gateway's flow control reads their
// parameters from the same config (hermod-gateway --flow-control) and
// applies them: the policies act on the gateway's queue and the requests
// it admitted, not on a scheduling cycle.
package flowpolicy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sync/atomic"

	"github.com/hermod/hermod/libs/scheduling"
)

// Fairness policies: how a priority band chooses among its flows.
const (
	// GlobalStrictFairness: one FIFO across the band's flows (the default).
	GlobalStrictFairness = "global-strict-fairness-policy"
	// RoundRobinFairness: the band's flows take turns.
	RoundRobinFairness = "round-robin-fairness-policy"
	// ProgramAwareFairness: the flow (program) with the least attained
	// service, in weighted tokens, goes first.
	ProgramAwareFairness = "program-aware-fairness"
)

// Ordering policies: which request of a flow goes first. Every request
// waits under the controller's one TTL, so the earliest deadline is the
// earliest arrival: edf orders as fcfs does.
const (
	FCFSOrdering = "fcfs-ordering-policy"
	EDFOrdering  = "edf-ordering-policy"
	// SLODeadlineOrdering: the earliest of arrival + x-llm-d-slo-ttft-ms
	// first, requests without an SLO after those with one.
	SLODeadlineOrdering = "slo-deadline-ordering-policy"
)

// Usage-limit policies: the saturation ceiling of each priority band.
const (
	StaticUsageLimit = "static-usage-limit-policy"
	PriorityHoldback = "priority-holdback-policy"
	SoftReflective   = "soft-reflective-ceiling-policy"
)

// Shapes and domains of priority-holdback-policy.
const (
	ShapeLinear = "linear"
	DomainRank  = "rank"
	DomainValue = "value"
)

func init() {
	for _, typ := range []string{GlobalStrictFairness, RoundRobinFairness, FCFSOrdering, EDFOrdering, SLODeadlineOrdering} {
		scheduling.Register(scheduling.Registration{Type: typ, New: newParameterless(typ)})
	}
	scheduling.Register(scheduling.Registration{Type: ProgramAwareFairness, New: func(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
		p, err := ParseProgramAware(raw, h)
		if err != nil {
			return nil, err
		}
		return &Policy{Named: scheduling.Named{Type: ProgramAwareFairness, Name: name}, Program: &p}, nil
	}})
	scheduling.Register(scheduling.Registration{Type: StaticUsageLimit, New: func(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
		p, err := ParseStatic(raw, h)
		if err != nil {
			return nil, err
		}
		return &Policy{Named: scheduling.Named{Type: StaticUsageLimit, Name: name}, Limit: p}, nil
	}})
	scheduling.Register(scheduling.Registration{Type: PriorityHoldback, New: func(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
		p, err := ParseHoldback(raw, h)
		if err != nil {
			return nil, err
		}
		return &Policy{Named: scheduling.Named{Type: PriorityHoldback, Name: name}, Limit: p}, nil
	}})
	scheduling.Register(scheduling.Registration{Type: SoftReflective, New: func(name string, raw json.RawMessage, _ scheduling.Handle) (scheduling.Plugin, error) {
		p, err := ParseSoftReflective(raw)
		if err != nil {
			return nil, err
		}
		return &Policy{Named: scheduling.Named{Type: SoftReflective, Name: name}, Limit: p}, nil
	}})
}

// Policy is a declared flow-control policy. In the picker it takes part
// in no scheduling cycle.
type Policy struct {
	scheduling.Named
	// Limit is a usage-limit policy's ceilings (nil for the others).
	Limit UsageLimit
	// Program is program-aware-fairness's parameters (nil for the others).
	Program *ProgramAware
}

// Parameters implements scheduling.ParameterReporter.
func (p *Policy) Parameters() any {
	if p.Program != nil {
		return p.Program
	}
	return p.Limit
}

func newParameterless(typ string) scheduling.Factory {
	return func(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
		if err := scheduling.DecodeParameters(raw, &struct{}{}, h); err != nil {
			return nil, err
		}
		return &Policy{Named: scheduling.Named{Type: typ, Name: name}}, nil
	}
}

// UsageLimit is a usage-limit policy: while the pool's saturation is at or
// above a band's ceiling, that band's requests wait.
type UsageLimit interface {
	// Ceilings sets ceilings[i] to the ceiling of priorities[i], the
	// priorities of the bands with requests waiting, highest first.
	Ceilings(saturation float64, priorities []int, ceilings []float64)
}

// Static is static-usage-limit-policy: one ceiling for every band.
type Static struct {
	// Threshold is in (0, 1]; 1 (the default) gates only a saturated pool.
	Threshold float64 `json:"threshold"`
}

// ParseStatic reads static-usage-limit-policy's parameters; h may be nil.
func ParseStatic(raw json.RawMessage, h scheduling.Handle) (Static, error) {
	p := Static{Threshold: 1}
	if err := scheduling.DecodeParameters(raw, &p, h); err != nil {
		return Static{}, err
	}
	if !(p.Threshold > 0 && p.Threshold <= 1) {
		return Static{}, scheduling.ParamErrorf("threshold", "must be in (0, 1] (got %v)", p.Threshold)
	}
	return p, nil
}

// Ceilings implements UsageLimit.
func (s Static) Ceilings(_ float64, _ []int, ceilings []float64) {
	for i := range ceilings {
		ceilings[i] = s.Threshold
	}
}

// Holdback is priority-holdback-policy: ceilings from MaxCeiling for the
// highest band down to MinCeiling for the lowest, by rank (even steps) or
// by value (in proportion to the priorities' spread), so that lower bands
// are held back first as saturation rises.
type Holdback struct {
	Shape      string   `json:"shape"`
	Domain     string   `json:"domain"`
	MinCeiling *float64 `json:"minCeiling"`
	MaxCeiling float64  `json:"maxCeiling"`
}

// ParseHoldback reads priority-holdback-policy's parameters; h may be nil.
func ParseHoldback(raw json.RawMessage, h scheduling.Handle) (Holdback, error) {
	p := Holdback{Shape: ShapeLinear, Domain: DomainRank, MaxCeiling: 1}
	if err := scheduling.DecodeParameters(raw, &p, h); err != nil {
		return Holdback{}, err
	}
	switch {
	case p.Shape != ShapeLinear:
		return Holdback{}, scheduling.ParamErrorf("shape", "%q is not %s (the only shape)", p.Shape, ShapeLinear)
	case p.Domain != DomainRank && p.Domain != DomainValue:
		return Holdback{}, scheduling.ParamErrorf("domain", "%q is not %s or %s", p.Domain, DomainRank, DomainValue)
	case p.MinCeiling == nil:
		return Holdback{}, scheduling.ParamErrorf("minCeiling", "required: the ceiling of the lowest band, in [0, 1)")
	case !(*p.MinCeiling >= 0 && *p.MinCeiling < 1):
		return Holdback{}, scheduling.ParamErrorf("minCeiling", "must be in [0, 1) (got %v)", *p.MinCeiling)
	case !(p.MaxCeiling > 0 && p.MaxCeiling <= 1):
		return Holdback{}, scheduling.ParamErrorf("maxCeiling", "must be in (0, 1] (got %v)", p.MaxCeiling)
	case *p.MinCeiling > p.MaxCeiling:
		return Holdback{}, scheduling.ParamErrorf("minCeiling", "%v is above maxCeiling %v", *p.MinCeiling, p.MaxCeiling)
	}
	return p, nil
}

// Ceilings implements UsageLimit.
func (p Holdback) Ceilings(_ float64, priorities []int, ceilings []float64) {
	lo, hi := *p.MinCeiling, p.MaxCeiling
	n := len(priorities)
	if n == 0 {
		return
	}
	pMax, pMin := priorities[0], priorities[n-1]
	for i, prio := range priorities {
		switch {
		case n == 1:
			ceilings[i] = hi
		case p.Domain == DomainValue && pMax == pMin:
			ceilings[i] = hi
		case p.Domain == DomainValue:
			ceilings[i] = lo + float64(prio-pMin)/float64(pMax-pMin)*(hi-lo)
		default:
			ceilings[i] = hi - float64(i)*(hi-lo)/float64(n-1)
		}
	}
}

// String describes the policy.
func (p Holdback) String() string {
	return fmt.Sprintf("%s %s ceilings %v..%v", p.Shape, p.Domain, *p.MinCeiling, p.MaxCeiling)
}

// Reflective is soft-reflective-ceiling-policy: band i of N (0 the
// highest) has the ceiling 1 - i*saturation/(N-1). A band under it is
// open; a band at or past it (saturation below 1) opens on one call in
// round(saturation/(1-saturation)), every such band on the same calls, so
// that its dispatch rate falls continuously as saturation rises; at
// saturation 1 every band is closed.
type Reflective struct {
	tick *atomic.Uint64
}

// ParseSoftReflective checks that soft-reflective-ceiling-policy has no
// parameters.
func ParseSoftReflective(raw json.RawMessage) (Reflective, error) {
	if r := bytes.TrimSpace(raw); len(r) > 0 && !bytes.Equal(r, []byte("null")) && !bytes.Equal(r, []byte("{}")) {
		return Reflective{}, errors.New("parameters: soft-reflective-ceiling-policy takes none")
	}
	return Reflective{tick: new(atomic.Uint64)}, nil
}

// Ceilings implements UsageLimit.
func (r Reflective) Ceilings(saturation float64, priorities []int, ceilings []float64) {
	n := len(priorities)
	opened, decided := false, false
	for i := range ceilings {
		switch {
		case n == 1 || saturation < 1-float64(i)*saturation/float64(n-1):
			ceilings[i] = 1
		case saturation >= 1:
			ceilings[i] = 0
		default:
			if !decided {
				period := uint64(max(1, math.Round(saturation/(1-saturation))))
				opened, decided = r.tick.Add(1)%period == 0, true
			}
			ceilings[i] = 0
			if opened {
				ceilings[i] = 1
			}
		}
	}
}

// MarshalJSON reports the policy's (empty) parameters.
func (r Reflective) MarshalJSON() ([]byte, error) { return []byte("{}"), nil }

// StrategyLAS is program-aware-fairness's one strategy: least attained
// service.
const StrategyLAS = "las"

// ProgramAware is program-aware-fairness's parameters. A program's
// attained service is prompt tokens + 2 x completion tokens of its
// finished requests; while it has nothing queued or in flight it decays,
// by half every LASHalfLifeSeconds, or (0) by LASDecayFactor per dispatch.
// A band picks the program with the highest
// LASWeightService x (1 - service) + LASWeightHeadWait x head wait, both
// normalized over the programs waiting (0.5 when all are equal). A
// program idle for EvictionTTLSeconds is forgotten.
type ProgramAware struct {
	Strategy             string  `json:"strategy"`
	EvictionTTLSeconds   float64 `json:"evictionTtlSeconds"`
	EvictionSweepSeconds float64 `json:"evictionSweepSeconds"`
	LASWeightService     float64 `json:"lasWeightService"`
	LASWeightHeadWait    float64 `json:"lasWeightHeadWait"`
	LASDecayFactor       float64 `json:"lasDecayFactor"`
	LASHalfLifeSeconds   float64 `json:"lasHalfLifeSeconds"`
}

// ParseProgramAware reads program-aware-fairness's parameters; h may be
// nil.
func ParseProgramAware(raw json.RawMessage, h scheduling.Handle) (ProgramAware, error) {
	p := ProgramAware{Strategy: StrategyLAS, EvictionTTLSeconds: 3600, EvictionSweepSeconds: 300,
		LASWeightService: 0.8, LASWeightHeadWait: 0.2, LASDecayFactor: 0.99997}
	if err := scheduling.DecodeParameters(raw, &p, h); err != nil {
		return ProgramAware{}, err
	}
	finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	switch {
	case p.Strategy != StrategyLAS:
		return ProgramAware{}, scheduling.ParamErrorf("strategy", "%q is not %s (the only strategy)", p.Strategy, StrategyLAS)
	case !finite(p.EvictionTTLSeconds) || p.EvictionTTLSeconds < 0:
		return ProgramAware{}, scheduling.ParamErrorf("evictionTtlSeconds", "must not be negative (got %v)", p.EvictionTTLSeconds)
	case !finite(p.EvictionSweepSeconds) || p.EvictionSweepSeconds <= 0:
		return ProgramAware{}, scheduling.ParamErrorf("evictionSweepSeconds", "must be positive (got %v)", p.EvictionSweepSeconds)
	case !finite(p.LASWeightService) || p.LASWeightService < 0:
		return ProgramAware{}, scheduling.ParamErrorf("lasWeightService", "must not be negative (got %v)", p.LASWeightService)
	case !finite(p.LASWeightHeadWait) || p.LASWeightHeadWait < 0:
		return ProgramAware{}, scheduling.ParamErrorf("lasWeightHeadWait", "must not be negative (got %v)", p.LASWeightHeadWait)
	case !(p.LASDecayFactor > 0 && p.LASDecayFactor <= 1):
		return ProgramAware{}, scheduling.ParamErrorf("lasDecayFactor", "must be in (0, 1] (got %v)", p.LASDecayFactor)
	case !finite(p.LASHalfLifeSeconds) || p.LASHalfLifeSeconds < 0:
		return ProgramAware{}, scheduling.ParamErrorf("lasHalfLifeSeconds", "must not be negative (got %v)", p.LASHalfLifeSeconds)
	}
	return p, nil
}
