package utilization_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	_ "github.com/hermod/hermod/libs/plugins/standard" // every plugin type
	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/libs/scheduling/schedulingtest"
)

// Each cap drops the endpoints over it; with every endpoint over, the
// request is shed, or with fallbackOnEmpty every one is kept.
func TestCaps(t *testing.T) {
	eps := schedulingtest.Endpoints(4)
	now := time.Now()
	for i, m := range []scheduling.Metrics{
		{RunningRequests: 2, WaitingRequests: 0, KVCacheUsage: 0.1},
		{RunningRequests: 9, WaitingRequests: 0, KVCacheUsage: 0.1},
		{RunningRequests: 2, WaitingRequests: 5, KVCacheUsage: 0.1},
		{RunningRequests: 2, WaitingRequests: 0, KVCacheUsage: 0.95},
	} {
		m.UpdatedAt = now
		eps[i].Metrics = &m
	}
	s := schedulingtest.Scheduler(t, `
plugins:
- type: utilization-filter
  parameters:
    conditions:
    - {metric: running-requests, maxValue: 8}
    - {metric: waiting-queue, maxValue: 4}
    - {metric: kv-cache-utilization, maxValue: 0.9}
- type: max-score-picker
`)
	for range 10 {
		res, err := s.Schedule(context.Background(), schedulingtest.Completion("r", "m", "hi"), eps)
		if err != nil {
			t.Fatal(err)
		}
		if got := res.Target().Endpoint.Name; got != "pod-0" {
			t.Fatalf("routed to %s, the only endpoint under every cap is pod-0", got)
		}
		res.Release()
	}
	_, err := s.Schedule(context.Background(), schedulingtest.Completion("r", "m", "hi"), eps[1:])
	var se *scheduling.Error
	if !errors.As(err, &se) || se.Kind != scheduling.KindShed {
		t.Errorf("all over a cap: %v, want the request shed", err)
	}
	open := schedulingtest.Scheduler(t, `
plugins:
- type: utilization-filter
  parameters: {fallbackOnEmpty: true, conditions: [{metric: running-requests, maxValue: 1}]}
- type: max-score-picker
`)
	res, err := open.Schedule(context.Background(), schedulingtest.Completion("r", "m", "hi"), eps)
	if err != nil {
		t.Fatalf("fallbackOnEmpty: %v", err)
	}
	res.Release()
}

// active-requests caps the in-flight requests inflight-load-producer
// counts: an endpoint at the cap takes no more until one completes.
func TestActiveRequestsCap(t *testing.T) {
	s := schedulingtest.Scheduler(t, `
plugins:
- type: utilization-filter
  parameters: {conditions: [{metric: active-requests, maxValue: 1}]}
- type: random-picker
`)
	ctx := context.Background()
	eps := schedulingtest.Endpoints(2)
	var held []*scheduling.Result
	for range 4 { // two each, then both are over
		res, err := s.Schedule(ctx, schedulingtest.Completion("r", "m", "hi"), eps)
		if err != nil {
			t.Fatalf("request %d: %v", len(held), err)
		}
		held = append(held, res)
	}
	if _, err := s.Schedule(ctx, schedulingtest.Completion("r", "m", "hi"), eps); err == nil {
		t.Fatal("a fifth request was routed with both endpoints at the cap")
	}
	s.ResponseComplete(ctx, scheduling.NewResponse(held[0], 200))
	res, err := s.Schedule(ctx, schedulingtest.Completion("r", "m", "hi"), eps)
	if err != nil {
		t.Fatalf("after a completion: %v", err)
	}
	if res.Target().Endpoint != held[0].Target().Endpoint {
		t.Errorf("routed to %s, the endpoint with room is %s", res.Target().Endpoint.Name, held[0].Target().Endpoint.Name)
	}
	for _, r := range append(held, res) {
		r.Release()
	}
}

func TestParamErrors(t *testing.T) {
	for params, want := range map[string]string{
		`{}`: "conditions: required",
		`{conditions: [{metric: nope, maxValue: 1}]}`:                 `"nope" is not one of`,
		`{conditions: [{metric: waiting-queue}]}`:                     "conditions[0].maxValue: required",
		`{conditions: [{metric: kv-cache-utilization, maxValue: 2}]}`: "at most 1",
		`{conditions: [{metric: running-requests, maxValue: -1}]}`:    "must not be negative",
	} {
		c, err := scheduling.ParseConfig([]byte("plugins: [{type: utilization-filter, parameters: " + params + "}]"))
		if err != nil {
			t.Fatal(err)
		}
		if s, err := scheduling.New(c); err == nil || !strings.Contains(err.Error(), want) {
			if s != nil {
				_ = s.Close()
			}
			t.Errorf("%s: %v, want %q", params, err, want)
		}
	}
}
