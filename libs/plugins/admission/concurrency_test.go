package admission_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	_ "github.com/hermod/hermod/libs/plugins/inflightload"
	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/libs/scheduling/schedulingtest"
)

// concurrency-detector as flowControl.saturationDetector: with every
// endpoint at maxConcurrency in-flight requests the pool is saturated and
// sheddable requests are refused; a completion makes room.
func TestConcurrencyDetectorShedsWhenFull(t *testing.T) {
	s := schedulingtest.Scheduler(t, `
plugins:
- name: detector
  type: concurrency-detector
  parameters: {maxConcurrency: 2}
- type: random-picker
schedulingProfiles:
- name: default
  plugins: [{pluginRef: random-picker}]
flowControl:
  saturationDetector: {pluginRef: detector}
`)
	ctx := context.Background()
	eps := schedulingtest.Endpoints(2)
	sheddable := func() *scheduling.Request {
		r := schedulingtest.Completion("s", "m", "hi")
		r.Headers = map[string]string{scheduling.PriorityHeader: "-1"}
		return r
	}
	var held []*scheduling.Result
	for range 4 {
		res, err := s.Schedule(ctx, schedulingtest.Completion("r", "m", "hi"), eps)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, res)
	}
	var se *scheduling.Error
	if _, err := s.Schedule(ctx, sheddable(), eps); !errors.As(err, &se) || se.Kind != scheduling.KindShed {
		t.Fatalf("4 in flight on 2 x 2: %v, want the sheddable request shed", err)
	}
	if res, err := s.Schedule(ctx, schedulingtest.Completion("r", "m", "hi"), eps); err != nil {
		t.Errorf("a request that is not sheddable: %v", err)
	} else {
		held = append(held, res)
	}
	for _, r := range held[:2] {
		s.ResponseComplete(ctx, scheduling.NewResponse(r, 200))
	}
	res, err := s.Schedule(ctx, sheddable(), eps)
	if err != nil {
		t.Fatalf("after two completions: %v", err)
	}
	for _, r := range append(held, res) {
		r.Release()
	}
}

// The modes: requests, tokens and hybrid saturation, and the filter's
// caps with headroom.
func TestConcurrencyModes(t *testing.T) {
	for _, c := range []struct {
		mode string
		want float64 // two requests of 400 tokens on one of two endpoints
	}{
		{"requests", (2.0 / 4) / 2},
		{"tokens", (800.0 / 1000) / 2},
		{"hybrid", math.Max(2.0/4, 800.0/1000) / 2},
	} {
		s := schedulingtest.Scheduler(t, `
plugins:
- type: inflight-load-producer
- name: d
  type: concurrency-detector
  parameters: {concurrencyMode: `+c.mode+`, maxConcurrency: 4, maxTokenConcurrency: 1000, headroom: 0.25}
- type: max-score-picker
schedulingProfiles:
- name: default
  plugins: [{pluginRef: d}, {pluginRef: max-score-picker}]
`)
		ctx := context.Background()
		eps := schedulingtest.Endpoints(2)
		var det scheduling.SaturationDetector
		for _, p := range s.Plugins() {
			if d, ok := p.(scheduling.SaturationDetector); ok {
				det = d
			}
		}
		var held []*scheduling.Result
		for range 2 {
			res, err := s.Schedule(ctx, schedulingtest.Completion("r", "m", strings.Repeat("abcd", 400)), eps[:1])
			if err != nil {
				t.Fatal(err)
			}
			held = append(held, res)
		}
		if got := det.Saturation(ctx, eps); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("%s: saturation %v, want %v", c.mode, got, c.want)
		}
		// two more fit under the caps (fewer than 4 x 1.25 requests and
		// 1000 x 1.25 tokens); then 1600 tokens are over the tokens cap,
		// 4 requests still under the requests cap
		for range 2 {
			res, err := s.Schedule(ctx, schedulingtest.Completion("r", "m", strings.Repeat("abcd", 400)), eps[:1])
			if err == nil {
				held = append(held, res)
			}
		}
		_, err := s.Schedule(ctx, schedulingtest.Completion("r", "m", "hi"), eps[:1])
		if full := err != nil; full != (c.mode != "requests") {
			t.Errorf("%s: after %d requests of 400 tokens, filtered out: %v (%v)", c.mode, len(held), full, err)
		}
		for _, r := range held {
			r.Release()
		}
	}
}
