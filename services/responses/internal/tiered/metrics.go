package tiered

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hermod/hermod/libs/telemetry"
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
		requests:    telemetry.NewCounterVec("hermod_responses_tier_requests_total", "Store operations per tier and result (hit, miss, error): the hit ratio per tier is hit / (hit + miss).", "op", "tier", "result"),
		rewarms:     telemetry.NewCounter("hermod_responses_rewarms_total", "Responses read from MongoDB and put back into Redis/Valkey."),
		synced:      telemetry.NewCounter("hermod_responses_synced_total", "Stream entries written to MongoDB and acknowledged."),
		claimed:     telemetry.NewCounter("hermod_responses_sync_claimed_total", "Stream entries taken over from a consumer that left them pending past claimAge."),
		syncErrors:  telemetry.NewCounter("hermod_responses_sync_errors_total", "Failed sync attempts (the entries stay pending and are retried)."),
		dropped:     telemetry.NewCounter("hermod_responses_sync_dropped_total", "Stream entries trimmed by stream.maxLen before MongoDB had them."),
		malformed:   telemetry.NewCounter("hermod_responses_sync_malformed_total", "Stream entries that could not be decoded (acknowledged and dropped)."),
		backlog:     telemetry.NewGauge("hermod_responses_sync_backlog", "Stream entries not yet in MongoDB (pending plus undelivered)."),
		lag:         telemetry.NewGauge("hermod_responses_sync_lag_seconds", "Age of the oldest stream entry not yet in MongoDB (0: none)."),
		lastSyncLag: telemetry.NewGauge("hermod_responses_sync_batch_lag_seconds", "Age of the oldest entry of the last batch written to MongoDB, when it was written."),
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
