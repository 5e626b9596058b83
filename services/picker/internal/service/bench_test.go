package service

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	pickerv1 "github.com/hermod/hermod/libs/api/hermod/picker/v1"
	registryv1 "github.com/hermod/hermod/libs/api/hermod/registry/v1"
	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/services/picker/internal/projection"
	"github.com/hermod/hermod/services/picker/internal/schedconfig"
)

// reference000 is reference/000's load-aware scorer set (with the prefix
// plugin no-hit-lru needs): the devstack's default.
const reference000 = `
plugins:
- type: prefix-cache-scorer
- type: queue-scorer
- {type: load-aware-scorer, parameters: {threshold: 128}}
- {type: active-request-scorer, parameters: {requestTimeout: "2m"}}
- type: session-affinity-scorer
- type: no-hit-lru-scorer
- {type: max-score-picker, parameters: {maxNumOfEndpoints: 2}}
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: queue-scorer
  - pluginRef: load-aware-scorer
  - pluginRef: active-request-scorer
  - pluginRef: session-affinity-scorer
  - pluginRef: no-hit-lru-scorer
  - pluginRef: max-score-picker
`

// discard is a decision sink that drops events (the publisher's cost is
// measured in libs/bus).
type discard struct{}

func (discard) Publish(string, string, proto.Message) bool { return true }

// BenchmarkPickRPC measures a Pick over a loopback gRPC connection with a
// ~1.8 KB prompt: the request path cost of the picker as a gateway sees it,
// decision event included. decision=picker queues the event for the
// picker's publisher (whose cost is measured in libs/bus); decision=caller
// encodes it into the answer, as the gateway asks. Each decision is
// completed in process (the Complete RPC is off the request path).
func BenchmarkPickRPC(b *testing.B) {
	for _, c := range []struct {
		name, config string
		n            int
		caller       bool
	}{
		{"test", "", 10, false}, {"test", "", 100, false},
		{"reference000", reference000, 10, false}, {"reference000", reference000, 10, true},
		{"reference000", reference000, 100, false}, {"reference000", reference000, 100, true},
	} {
		b.Run(fmt.Sprintf("config=%s/endpoints=%d/decision=%s", c.name, c.n, map[bool]string{false: "picker", true: "caller"}[c.caller]), func(b *testing.B) {
			n := c.n
			eps := make([]*registryv1.Endpoint, n)
			for i := range eps {
				eps[i] = ep(fmt.Sprintf("pod-%03d", i), fmt.Sprintf("10.0.%d.%d", i/250, i%250))
			}
			f := newFixtureWith(b, func(o *Options) { o.Decisions = discard{} }, eps...)
			if c.config != "" {
				if err := f.loader.Apply(schedconfig.Version{Source: schedconfig.SourceFile, Data: []byte(c.config)}); err != nil {
					b.Fatal(err)
				}
			}
			for i, e := range eps {
				f.set.UpdateMetrics(&eventsv1.PodMetrics{Endpoint: e.GetName(), Time: timestamppb.New(time.Now()), WaitingRequests: int64(i % 7)})
			}
			f.set.Flush()
			body := []byte(`{"model": "llama", "prompt": "` + strings.Repeat("The quick brown fox jumps over the lazy dog. ", 40) + `"}`)
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				out, err := f.client.Pick(ctx, &pickerv1.PickRequest{RequestId: "r", Api: pickerv1.Api_API_COMPLETIONS, Body: body, CallerPublishesDecision: c.caller})
				if err != nil {
					b.Fatal(err)
				}
				f.folder.Completion(ctx, &eventsv1.RequestCompleted{DecisionId: out.GetDecisionId(), Pool: "pool"}, projection.SourceRPC)
			}
		})
	}
}

// BenchmarkPick measures Server.Pick called in process (no gRPC): the
// scheduling cycle with the service's own work around it (parsing,
// candidate filtering, the decision event), without the transport's
// noise, so that a few hundred nanoseconds added to it show. tracing=off
// is the picker without --otlp-endpoint; tracing=on records a "scheduling
// cycle" span per Pick (into an SDK provider that exports nothing, so the
// cost is the span's, not an exporter's).
func BenchmarkPick(b *testing.B) {
	for _, n := range []int{10, 100} {
		for _, tracing := range []bool{false, true} {
			b.Run(fmt.Sprintf("config=reference000/endpoints=%d/tracing=%s", n, map[bool]string{false: "off", true: "on"}[tracing]), func(b *testing.B) {
				eps := make([]*registryv1.Endpoint, n)
				for i := range eps {
					eps[i] = ep(fmt.Sprintf("pod-%03d", i), fmt.Sprintf("10.0.%d.%d", i/250, i%250))
				}
				var tracer trace.Tracer
				if tracing {
					tp := sdktrace.NewTracerProvider()
					b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
					tracer = tp.Tracer("bench")
				}
				f := newFixtureWith(b, func(o *Options) { o.Decisions, o.Tracer = discard{}, tracer }, eps...)
				if err := f.loader.Apply(schedconfig.Version{Source: schedconfig.SourceFile, Data: []byte(reference000)}); err != nil {
					b.Fatal(err)
				}
				for i, e := range eps {
					f.set.UpdateMetrics(&eventsv1.PodMetrics{Endpoint: e.GetName(), Time: timestamppb.New(time.Now()), WaitingRequests: int64(i % 7)})
				}
				f.set.Flush()
				in := &pickerv1.PickRequest{RequestId: "r", Api: pickerv1.Api_API_COMPLETIONS,
					Body: []byte(`{"model": "llama", "prompt": "` + strings.Repeat("The quick brown fox jumps over the lazy dog. ", 40) + `"}`)}
				ctx := context.Background()
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					out, err := f.srv.Pick(ctx, in)
					if err != nil {
						b.Fatal(err)
					}
					f.folder.Completion(ctx, &eventsv1.RequestCompleted{DecisionId: out.GetDecisionId(), Pool: "pool"}, projection.SourceRPC)
				}
			})
		}
	}
}

// BenchmarkObserveDecision is the cost the routing-decisions counter adds
// to every Pick (one profile with a target, as in a decode-only pool).
func BenchmarkObserveDecision(b *testing.B) {
	m := NewMetrics(prometheus.NewRegistry(), "pool", nil)
	targets := make([][]scheduling.Target, 100)
	for i := range targets {
		targets[i] = []scheduling.Target{{Endpoint: &scheduling.Endpoint{Name: fmt.Sprintf("pod-%03d", i)}}}
	}
	res := &scheduling.Result{Profiles: []*scheduling.ProfileResult{{Profile: "default"}}}
	res.Primary = res.Profiles[0]
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		res.Profiles[0].Targets = targets[i%len(targets)]
		m.observeDecision(res)
		i++
	}
}
