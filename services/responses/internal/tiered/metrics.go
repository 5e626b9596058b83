package tiered

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hermod/hermod/services/responses/internal/store"
)

// Metrics are the tiered store's Prometheus metrics.
type Metrics struct {
	requests    *prometheus.CounterVec
	rewarms     prometheus.Counter
	synced      prometheus.Counter
	claimed     prometheus.Counter
	syncErrors  prometheus.Counter
	dropped     prometheus.Counter
	malformed   prometheus.Counter
	backlog     prometheus.Gauge
	lag         prometheus.Gauge
	lastSyncLag prometheus.Gauge
}

// NewMetrics returns unregistered metrics.
func NewMetrics() *Metrics {
	return &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hermod_responses_tier_requests_total",
			Help: "Store operations per tier and result (hit, miss, error): the hit ratio per tier is hit / (hit + miss).",
		}, []string{"op", "tier", "result"}),
		rewarms: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hermod_responses_rewarms_total", Help: "Responses read from MongoDB and put back into Redis/Valkey.",
		}),
		synced: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hermod_responses_synced_total", Help: "Stream entries written to MongoDB and acknowledged.",
		}),
		claimed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hermod_responses_sync_claimed_total", Help: "Stream entries taken over from a consumer that left them pending past claimAge.",
		}),
		syncErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hermod_responses_sync_errors_total", Help: "Failed sync attempts (the entries stay pending and are retried).",
		}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hermod_responses_sync_dropped_total", Help: "Stream entries trimmed by stream.maxLen before MongoDB had them.",
		}),
		malformed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hermod_responses_sync_malformed_total", Help: "Stream entries that could not be decoded (acknowledged and dropped).",
		}),
		backlog: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hermod_responses_sync_backlog", Help: "Stream entries not yet in MongoDB (pending plus undelivered).",
		}),
		lag: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hermod_responses_sync_lag_seconds", Help: "Age of the oldest stream entry not yet in MongoDB (0: none).",
		}),
		lastSyncLag: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hermod_responses_sync_batch_lag_seconds", Help: "Age of the oldest entry of the last batch written to MongoDB, when it was written.",
		}),
	}
}

// Collectors are the metrics to register.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.requests, m.rewarms, m.synced, m.claimed, m.syncErrors, m.dropped, m.malformed, m.backlog, m.lag, m.lastSyncLag}
}

func (m *Metrics) op(op string, tier store.Tier, err error) {
	result := "hit"
	switch {
	case errors.Is(err, store.ErrNotFound):
		result = "miss"
	case err != nil:
		result = "error"
	}
	if op != "get" && err == nil {
		result = "ok"
	}
	m.requests.WithLabelValues(op, string(tier), result).Inc()
}
