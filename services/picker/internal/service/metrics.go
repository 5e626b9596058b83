package service

import (
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/status"

	"github.com/hermod/hermod/services/picker/internal/endpoints"
)

// Metrics are the picker service's Prometheus metrics.
type Metrics struct {
	pickDuration     *prometheus.HistogramVec
	decisionsDropped prometheus.Counter
}

// NewMetrics registers the service metrics on reg (nil: not registered),
// including the GIE pool gauges computed from set's view.
func NewMetrics(reg prometheus.Registerer, pool string, set *endpoints.Set) *Metrics {
	m := &Metrics{
		pickDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "hermod_picker_pick_duration_seconds",
			Help:    "Time to serve a Pick RPC, by gRPC code.",
			Buckets: prometheus.ExponentialBuckets(10e-6, 2, 16),
		}, []string{"code"}),
		decisionsDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hermod_picker_decisions_dropped_total",
			Help: "Decision events that could not be queued for publishing (the publisher's queue was full).",
		}),
	}
	if reg == nil {
		return m
	}
	reg.MustRegister(m.pickDuration, m.decisionsDropped)
	if set == nil {
		return m
	}
	labels := prometheus.Labels{"name": pool}
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "inference_pool_ready_pods", Help: "Ready endpoints of the pool.", ConstLabels: labels,
		}, func() float64 { return float64(len(set.View().Candidates)) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "inference_pool_average_queue_size", Help: "Mean waiting requests over the pool's ready endpoints.", ConstLabels: labels,
		}, func() float64 {
			return average(set, func(w, _ float64) float64 { return w })
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "inference_pool_average_kv_cache_utilization", Help: "Mean KV-cache usage (0..1) over the pool's ready endpoints.", ConstLabels: labels,
		}, func() float64 {
			return average(set, func(_, kv float64) float64 { return kv })
		}),
	)
	return m
}

func average(set *endpoints.Set, f func(waiting, kv float64) float64) float64 {
	sum, n := 0.0, 0
	for _, e := range set.View().Candidates {
		if e.Metrics == nil {
			continue
		}
		sum += f(float64(e.Metrics.WaitingRequests), e.Metrics.KVCacheUsage)
		n++
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}

func (m *Metrics) observePick(start time.Time, err error) {
	code := strings.ToLower(status.Code(err).String())
	m.pickDuration.WithLabelValues(code).Observe(time.Since(start).Seconds())
}
