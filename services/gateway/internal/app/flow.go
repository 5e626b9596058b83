package app

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

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
	queueSize := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "inference_extension_flow_control_queue_size",
		Help: "Requests waiting in the gateway's flow-control queue, per model.",
	}, []string{"model"})
	if err := reg.Register(queueSize); err != nil {
		return nil, nil, err
	}
	st.Config.Observe = func(model string, n int) { queueSize.WithLabelValues(model).Set(float64(n)) }
	sat := flowcontrol.NewPoolSaturation()
	sat.QueueDepth, sat.KVCacheUtil = st.QueueDepth, st.KVCacheUtil
	ctrl := flowcontrol.New(st.Config, flowcontrol.NewSlots(st.MaxConcurrency, sat.Saturated))
	filter, err := bus.MetricsFilter(cfg.Pool)
	if err != nil {
		return nil, nil, err
	}
	sub, err := bus.Subscribe(nc, filter, func(m *eventsv1.PodMetrics, _ string) {
		if sat.Update(m.GetEndpoint(), m.GetWaitingRequests(), m.GetKvCacheUsage()) {
			ctrl.Kick()
		}
	}, bus.WithLogger(log), bus.WithRegisterer(reg))
	if err != nil {
		return nil, nil, err
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); ctrl.Run(rctx, 100*time.Millisecond) }()
	log.Info("flow control", "queueing", st.Config.Queueing, "max_concurrency", st.MaxConcurrency, "objectives", len(st.Objectives))
	stop := func() {
		_ = sub.Close()
		cancel()
		<-done
	}
	return &proxy.Flow{Controller: ctrl, Settings: st}, stop, nil
}
