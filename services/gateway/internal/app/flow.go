package app

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/types/known/timestamppb"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	"github.com/hermod/hermod/libs/bus"
	"github.com/hermod/hermod/services/gateway/internal/flowcontrol"
	"github.com/hermod/hermod/services/gateway/internal/proxy"
)

// startFlowControl reads --flow-control, follows the pool's metrics for
// the saturation rule and runs the dispatcher; stop ends both.
func startFlowControl(ctx context.Context, cfg Config, nc *nats.Conn, reg *prometheus.Registry, log *slog.Logger) (*proxy.Flow, func(), error) {
	st, err := flowcontrol.ReadFile(cfg.FlowControlFile)
	if err != nil {
		return nil, nil, fmt.Errorf("--flow-control %s: %w", cfg.FlowControlFile, err)
	}
	subject, err := bus.FlowControlSubject(cfg.Pool, cfg.Replica)
	if err != nil {
		return nil, nil, err
	}
	q := &queueReport{sizes: map[string]int64{}, changed: make(chan struct{}, 1)}
	st.Config.Observe = q.set
	sat := flowcontrol.NewPoolSaturation()
	sat.QueueDepth, sat.KVCacheUtil, sat.HoldWhenEmpty, sat.Staleness = st.QueueDepth, st.KVCacheUtil, st.HoldWhenEmpty, st.Staleness
	st.Config.PoolEmpty = sat.Empty
	var slots *flowcontrol.Slots
	level := sat.Level
	switch st.Detector {
	case flowcontrol.DetectEveryEndpoint:
		slots = flowcontrol.NewSlots(st.MaxConcurrency, sat.Saturated)
	case flowcontrol.DetectUtilization:
		sat.FailClosed = true
		slots = flowcontrol.NewSlots(st.MaxConcurrency, nil)
		st.Config.Saturation = sat.Level
	case flowcontrol.DetectConcurrency:
		slots = flowcontrol.NewSlots(st.MaxConcurrency, nil)
		level = func() float64 { return concurrencySaturation(slots.InUse(), sat.Endpoints(), st.EndpointConcurrency) }
		st.Config.Saturation = level
	}
	st.Config.Metrics = flowcontrol.NewMetrics(reg, cfg.Pool, level)
	ctrl := flowcontrol.New(st.Config, slots)
	filter, err := bus.MetricsFilter(cfg.Pool)
	if err != nil {
		return nil, nil, err
	}
	gradient := st.Detector == flowcontrol.DetectUtilization
	sub, err := bus.Subscribe(nc, filter, func(m *eventsv1.PodMetrics, _ string) {
		// the utilization detector's reading moves with every sample
		if sat.Update(m.GetEndpoint(), m.GetWaitingRequests(), m.GetKvCacheUsage()) || gradient {
			ctrl.Kick()
		}
	}, bus.WithLogger(log), bus.WithRegisterer(reg))
	if err != nil {
		return nil, nil, err
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{}, 2)
	go func() { defer func() { done <- struct{}{} }(); ctrl.Run(rctx, 100*time.Millisecond) }()
	go func() {
		defer func() { done <- struct{}{} }()
		q.run(rctx, func(sizes map[string]int64) {
			ev := &eventsv1.FlowControlQueue{Pool: cfg.Pool, Replica: cfg.Replica, Queued: sizes, Time: timestamppb.Now()}
			if err := bus.PublishCore(nc, subject, ev); err != nil {
				log.Debug("publishing the queue size failed", "error", err)
			}
		})
	}()
	for _, w := range st.Warnings {
		log.Warn("flow control: " + w)
	}
	log.Info("flow control", "source", st.Source, "queueing", st.Config.Queueing, "detector", st.Detector.String(),
		"staleness", st.Staleness, "max_concurrency", st.MaxConcurrency, "objectives", len(st.Objectives))
	stop := func() {
		_ = sub.Close()
		cancel()
		<-done
		<-done
	}
	return &proxy.Flow{Controller: ctrl, Settings: st, Retain: func(names map[string]bool) {
		// an endpoint that left no longer counts; one that joined brings
		// room (and ends a wait for the first endpoint)
		sat.Retain(names)
		ctrl.Kick()
	}}, stop, nil
}

// concurrencySaturation is concurrency-detector's reading (requests mode)
// from this gateway's requests in flight: 1 with no endpoint.
func concurrencySaturation(inFlight, endpoints, perEndpoint int) float64 {
	if endpoints == 0 || perEndpoint <= 0 {
		return 1
	}
	return float64(inFlight) / float64(endpoints*perEndpoint)
}

// Queue reports: at once on a change (the autoscaler's scale-from-zero
// trigger), then at most every queueReportMin while the sizes change, and
// every queueReportEvery regardless.
const (
	queueReportMin   = 100 * time.Millisecond
	queueReportEvery = 5 * time.Second
)

// queueReport holds the queue sizes per model for the publisher.
type queueReport struct {
	mu      sync.Mutex
	sizes   map[string]int64
	changed chan struct{}
}

// set records a model's queue size (called under the controller's lock:
// it does not block).
func (q *queueReport) set(model string, n int) {
	q.mu.Lock()
	if n == 0 {
		delete(q.sizes, model)
	} else {
		q.sizes[model] = int64(n)
	}
	q.mu.Unlock()
	select {
	case q.changed <- struct{}{}:
	default:
	}
}

func (q *queueReport) snapshot() map[string]int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make(map[string]int64, len(q.sizes))
	for m, n := range q.sizes {
		out[m] = n
	}
	return out
}

// run publishes the sizes until ctx ends.
func (q *queueReport) run(ctx context.Context, publish func(map[string]int64)) {
	every := time.NewTicker(queueReportEvery)
	defer every.Stop()
	publish(q.snapshot())
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-every.C:
		case <-q.changed:
			if wait := queueReportMin - time.Since(last); wait > 0 {
				select { // coalesce a burst of changes
				case <-ctx.Done():
					return
				case <-time.After(wait):
				}
				select { // the burst's later changes are in this report
				case <-q.changed:
				default:
				}
			}
		}
		publish(q.snapshot())
		last = time.Now()
	}
}
