package app

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	"github.com/hermod/hermod/libs/bootstrap"
	"github.com/hermod/hermod/libs/bus"
	"github.com/hermod/hermod/services/gateway/internal/flowcontrol"
	"github.com/hermod/hermod/services/gateway/internal/proxy"
	"github.com/hermod/hermod/testkit/bustest"
)

// The queue sizes are published once at the start, then once per burst
// of changes (coalesced), with models at zero left out.
func TestQueueReportCoalescesChanges(t *testing.T) {
	q := &queueReport{sizes: map[string]int64{}, changed: make(chan struct{}, 1)}
	got := make(chan map[string]int64, 16)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); q.run(ctx, func(m map[string]int64) { got <- m }) }()
	if m := <-got; len(m) != 0 {
		t.Fatalf("first report %v", m)
	}
	for i := 1; i <= 50; i++ {
		q.set("llama", i)
	}
	q.set("qwen", 2)
	q.set("qwen", 0)
	select {
	case m := <-got:
		if m["llama"] != 50 || len(m) != 1 {
			t.Fatalf("report %v, want llama at 50 alone", m)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("no report after the changes")
	}
	select {
	case m := <-got:
		t.Fatalf("a second report %v for one burst", m)
	case <-time.After(3 * queueReportMin):
	}
	cancel()
	<-done
}

// After a quiet spell a change is published at once (the autoscaler's
// scale-from-zero trigger), not after the coalescing delay.
func TestQueueReportPublishesAFirstChangeAtOnce(t *testing.T) {
	q := &queueReport{sizes: map[string]int64{}, changed: make(chan struct{}, 1)}
	got := make(chan time.Time, 16)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); q.run(ctx, func(map[string]int64) { got <- time.Now() }) }()
	<-got
	time.Sleep(2 * queueReportMin)
	start := time.Now()
	q.set("llama", 1)
	select {
	case at := <-got:
		if d := at.Sub(start); d >= queueReportMin {
			t.Fatalf("first change published after %v, want at once", d)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("no report")
	}
	cancel()
	<-done
}

// startFlowControl follows the pool's metrics (a saturated pool holds
// requests back) and publishes the queue on the flow-control subject.
func TestFlowControlFollowsMetricsAndPublishesTheQueue(t *testing.T) {
	srv := bustest.Start(t)
	nc, _ := bustest.Connect(t, srv)
	file := filepath.Join(t.TempDir(), "flow.yaml")
	if err := os.WriteFile(file, []byte("queueing: true\ndefaultRequestTTL: 5s\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	reports := make(chan *eventsv1.FlowControlQueue, 16)
	subject, _ := bus.FlowControlSubject("pool", "gw-1")
	sub, err := bus.Subscribe(nc, subject, func(q *eventsv1.FlowControlQueue, _ string) { reports <- q })
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Close() }()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	flow, stop, err := startFlowControl(ctx, Config{Config: bootstrap.Config{Pool: "pool", Replica: "gw-1"}, FlowControlFile: file}, nc, prometheus.NewRegistry(), quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	// the only endpoint's queue is long: the pool is saturated
	metrics, _ := bus.MetricsSubject("pool", "pod-0")
	saturate := func(waiting int64) {
		if err := bus.PublishCore(nc, metrics, &eventsv1.PodMetrics{Pool: "pool", Endpoint: "pod-0", WaitingRequests: waiting}); err != nil {
			t.Fatal(err)
		}
	}
	admitted := make(chan error, 1)
	deadline := time.Now().Add(5 * time.Second)
	for flow.Controller.Queued() == 0 {
		saturate(9)
		select {
		case err := <-admitted:
			if err != nil {
				t.Fatal(err)
			}
			flow.Controller.Release()
		default:
		}
		if len(admitted) == 0 {
			go func() { admitted <- flow.Controller.Acquire(ctx, flowcontrol.Request{Model: "llama"}) }()
		}
		if time.Now().After(deadline) {
			t.Fatal("a saturated pool admitted every request")
		}
		time.Sleep(20 * time.Millisecond)
	}
	for seen := false; !seen; {
		select {
		case q := <-reports:
			seen = q.GetQueued()["llama"] == 1 && q.GetReplica() == "gw-1"
		case <-time.After(3 * time.Second):
			t.Fatal("no report of the queued request")
		}
	}
	saturate(0) // room again: the queued request goes
	if err := <-admitted; err != nil {
		t.Fatal(err)
	}
	flow.Controller.Release()
}

// With an EndpointPickerConfig, the gateway queues as the llm-d router
// does: an endpoint without metrics counts as saturated (fail closed),
// its first fresh sample below the thresholds lets the queue go; with the
// concurrency detector the pool holds maxConcurrency requests per
// endpoint.
func TestFlowControlFromAnEndpointPickerConfig(t *testing.T) {
	srv := bustest.Start(t)
	nc, _ := bustest.Connect(t, srv)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := func(cfg string) *proxy.Flow {
		file := filepath.Join(t.TempDir(), "epp.yaml")
		if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		flow, stop, err := startFlowControl(ctx, Config{Config: bootstrap.Config{Pool: "pool", Replica: "gw-1"}, FlowControlFile: file}, nc, prometheus.NewRegistry(), quiet)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(stop)
		return flow
	}
	waitQueued := func(f *proxy.Flow, n int) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); f.Controller.Queued() != n; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d queued, want %d", f.Controller.Queued(), n)
			}
		}
	}

	util := start("kind: EndpointPickerConfig\nfeatureGates: [flowControl]\nplugins: [{type: utilization-detector}]\n")
	util.Retain(map[string]bool{"pod-0": true})
	admitted := make(chan error, 2)
	go func() { admitted <- util.Controller.Acquire(ctx, flowcontrol.Request{Priority: -3, Model: "llama"}) }()
	waitQueued(util, 1) // no metrics yet: saturated; a sheddable request waits
	metrics, _ := bus.MetricsSubject("pool", "pod-0")
	if err := bus.PublishCore(nc, metrics, &eventsv1.PodMetrics{Pool: "pool", Endpoint: "pod-0", WaitingRequests: 1, KvCacheUsage: 0.2}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-admitted:
		if err != nil {
			t.Fatal(err)
		}
		util.Controller.Release()
	case <-time.After(5 * time.Second):
		t.Fatal("a fresh sample below the thresholds did not let the queue go")
	}

	conc := start(`kind: EndpointPickerConfig
featureGates: [flowControl]
plugins: [{type: concurrency-detector, parameters: {maxConcurrency: 1}}]
flowControl: {saturationDetector: {pluginRef: concurrency-detector}}
`)
	conc.Retain(map[string]bool{"pod-0": true})
	if err := conc.Controller.Acquire(ctx, flowcontrol.Request{}); err != nil {
		t.Fatal(err)
	}
	go func() { admitted <- conc.Controller.Acquire(ctx, flowcontrol.Request{}) }()
	waitQueued(conc, 1) // one request per endpoint
	conc.Retain(map[string]bool{"pod-0": true, "pod-1": true})
	if err := <-admitted; err != nil { // a second endpoint: room for one more
		t.Fatal(err)
	}
	conc.Controller.Release()
	conc.Controller.Release()
}
