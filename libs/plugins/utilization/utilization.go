// Package utilization holds utilization-filter (the llm-d router's
// v0.10 successor of active-request-filter): it drops the endpoints over
// any of its caps on in-flight requests (from inflight-load-producer),
// running requests, waiting requests or KV-cache utilization (from the
// endpoints' metrics).
package utilization

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/hermod/hermod/libs/plugins/inflightload"
	"github.com/hermod/hermod/libs/scheduling"
)

// Type is the registered plugin type.
const Type = "utilization-filter"

// The metrics a condition caps.
const (
	MetricActiveRequests     = "active-requests"
	MetricRunningRequests    = "running-requests"
	MetricWaitingQueue       = "waiting-queue"
	MetricKVCacheUtilization = "kv-cache-utilization"
)

func init() {
	scheduling.Register(scheduling.Registration{Type: Type, New: New})
}

// Condition caps one metric: an endpoint is kept when its value is at
// most MaxValue.
type Condition struct {
	Metric   string   `json:"metric"`
	MaxValue *float64 `json:"maxValue"`
}

// Params are utilization-filter's parameters.
type Params struct {
	Conditions []Condition `json:"conditions"`
	// FallbackOnEmpty keeps every candidate when none passes (fail open);
	// otherwise the request is shed.
	FallbackOnEmpty          bool   `json:"fallbackOnEmpty"`
	InFlightLoadProducerName string `json:"inFlightLoadProducerName,omitempty"`
}

// Filter is utilization-filter.
type Filter struct {
	scheduling.Named
	params Params
	load   scheduling.InFlightLoader // nil unless a condition caps active requests
}

// New builds a utilization-filter.
func New(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
	var p Params
	if err := scheduling.DecodeParameters(raw, &p, h); err != nil {
		return nil, err
	}
	if len(p.Conditions) == 0 {
		return nil, scheduling.ParamErrorf("conditions", "required: at least one {metric, maxValue} (metric: %s, %s, %s or %s)",
			MetricActiveRequests, MetricRunningRequests, MetricWaitingQueue, MetricKVCacheUtilization)
	}
	f := &Filter{Named: scheduling.Named{Type: Type, Name: name}, params: p}
	for i, c := range p.Conditions {
		field := fmt.Sprintf("conditions[%d]", i)
		if c.MaxValue == nil {
			return nil, scheduling.ParamErrorf(field+".maxValue", "required")
		}
		if *c.MaxValue < 0 {
			return nil, scheduling.ParamErrorf(field+".maxValue", "must not be negative (got %v)", *c.MaxValue)
		}
		switch c.Metric {
		case MetricActiveRequests:
			if f.load == nil {
				l, err := inflightload.Loader(h, p.InFlightLoadProducerName)
				if err != nil {
					return nil, err
				}
				f.load = l
			}
		case MetricKVCacheUtilization:
			if *c.MaxValue > 1 {
				return nil, scheduling.ParamErrorf(field+".maxValue", "a KV-cache utilization is at most 1 (got %v)", *c.MaxValue)
			}
		case MetricRunningRequests, MetricWaitingQueue:
		default:
			return nil, scheduling.ParamErrorf(field+".metric", "%q is not one of %s, %s, %s, %s", c.Metric,
				MetricActiveRequests, MetricRunningRequests, MetricWaitingQueue, MetricKVCacheUtilization)
		}
	}
	return f, nil
}

// Parameters implements scheduling.ParameterReporter.
func (f *Filter) Parameters() any { return f.params }

// ShedsLoad implements scheduling.LoadShedder: what it drops, it drops
// for load (the request is shed with 429 when nothing is left).
func (f *Filter) ShedsLoad() {}

// Filter implements scheduling.Filter. A metric an endpoint does not
// report counts as 0.
func (f *Filter) Filter(_ context.Context, _ *scheduling.CycleState, _ *scheduling.Request, in, dst []*scheduling.Endpoint) []*scheduling.Endpoint {
	start := len(dst)
	for _, e := range in {
		if f.keeps(e) {
			dst = append(dst, e)
		}
	}
	if len(dst) == start && f.params.FallbackOnEmpty {
		dst = append(dst, in...)
	}
	return dst
}

func (f *Filter) keeps(e *scheduling.Endpoint) bool {
	for _, c := range f.params.Conditions {
		if f.value(e, c.Metric) > *c.MaxValue {
			return false
		}
	}
	return true
}

func (f *Filter) value(e *scheduling.Endpoint, metric string) float64 {
	if metric == MetricActiveRequests {
		return float64(f.load.InFlightLoad(e).Requests)
	}
	m := e.Metrics
	if m == nil {
		return 0
	}
	switch metric {
	case MetricRunningRequests:
		return float64(m.RunningRequests)
	case MetricWaitingQueue:
		return float64(m.WaitingRequests)
	default:
		return m.KVCacheUsage
	}
}
