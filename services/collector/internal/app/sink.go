package app

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	"github.com/hermod/hermod/libs/bus"
	"github.com/hermod/hermod/libs/telemetry"
)

// natsSink publishes every scrape on hermod.metrics.<pool>.<endpoint> and
// keeps the latest in the metrics bucket, at most every kvInterval per
// endpoint (and at once when its health changes), so the bucket stays a
// cheap bootstrap for new readers rather than a second copy of the stream.
type natsSink struct {
	nc         *nats.Conn
	kv         jetstream.KeyValue
	kvInterval time.Duration
	log        *slog.Logger
	published  prometheus.Counter
	failed     *prometheus.CounterVec

	mu   sync.Mutex
	last map[string]bucketEntry // by subject
}

type bucketEntry struct {
	at      time.Time
	healthy bool
}

func newNATSSink(nc *nats.Conn, kv jetstream.KeyValue, kvInterval time.Duration, reg prometheus.Registerer, log *slog.Logger) *natsSink {
	s := &natsSink{nc: nc, kv: kv, kvInterval: kvInterval, log: log, last: map[string]bucketEntry{},
		published: telemetry.NewCounter("hermod_collector_published_total", "PodMetrics published on NATS."),
		failed:    telemetry.NewCounterVec("hermod_collector_publish_errors_total", "PodMetrics that could not be published, by target (subject or bucket).", "target"),
	}
	if reg != nil {
		reg.MustRegister(s.published, s.failed)
	}
	return s
}

// Publish implements scrape.Sink.
func (s *natsSink) Publish(m *eventsv1.PodMetrics) {
	subject, err := bus.MetricsSubject(m.GetPool(), m.GetEndpoint())
	if err != nil {
		s.failed.WithLabelValues("subject").Inc()
		return
	}
	if err := bus.PublishCore(s.nc, subject, m); err != nil {
		s.failed.WithLabelValues("subject").Inc()
	} else {
		s.published.Inc()
	}
	healthy := m.GetConsecutiveFailures() == 0
	now := time.Now()
	s.mu.Lock()
	prev, ok := s.last[subject]
	due := !ok || prev.healthy != healthy || now.Sub(prev.at) >= s.kvInterval
	if due {
		s.last[subject] = bucketEntry{at: now, healthy: healthy}
	}
	s.mu.Unlock()
	if !due || s.kv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := bus.PutLatestMetrics(ctx, s.kv, m); err != nil {
		s.failed.WithLabelValues("bucket").Inc()
		s.log.Debug("storing the latest metrics failed", "endpoint", m.GetEndpoint(), "error", err)
	}
}

// forget drops the bucket bookkeeping of endpoints no longer scraped here.
func (s *natsSink) forget(keep map[string]bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for subject := range s.last {
		if !keep[subject] {
			delete(s.last, subject)
		}
	}
}
