package bus

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hermod/hermod/libs/telemetry"
)

// Reasons of hermod_bus_publish_dropped_total.
const (
	dropQueueFull = "queue_full" // the queue was full
	dropEncode    = "encode"     // the message did not marshal
	dropClosed    = "closed"     // Publish after Close
	dropRejected  = "rejected"   // the server refused it, or never acked it, MaxAttempts times
	dropShutdown  = "shutdown"   // still unconfirmed when Close's context ended
)

// publisherMetrics are a Publisher's Prometheus metrics.
type publisherMetrics struct {
	published  prometheus.Counter
	duplicates prometheus.Counter
	failed     prometheus.Counter
	dropped    *prometheus.CounterVec
	queued     prometheus.Gauge
}

func newPublisherMetrics(reg prometheus.Registerer) *publisherMetrics {
	return &publisherMetrics{
		published:  register(reg, telemetry.NewCounter("hermod_bus_published_total", "Events the stream acknowledged (duplicates included).")),
		duplicates: register(reg, telemetry.NewCounter("hermod_bus_publish_duplicates_total", "Acknowledged events the stream had already stored (same Nats-Msg-Id within the duplicate window).")),
		failed:     register(reg, telemetry.NewCounter("hermod_bus_publish_failed_attempts_total", "Publish attempts that failed and were retried or dropped.")),
		dropped:    register(reg, telemetry.NewCounterVec("hermod_bus_publish_dropped_total", "Events that were never published, by reason (queue_full, encode, closed, rejected, shutdown).", "reason")),
		queued:     register(reg, telemetry.NewGauge("hermod_bus_publish_queue_length", "Events waiting in publisher queues.")),
	}
}

// decodeMetrics count the messages consumers and subscriptions handled and
// the ones they skipped because they did not decode.
type decodeMetrics struct {
	consumed     *prometheus.CounterVec
	decodeErrors *prometheus.CounterVec
}

func newDecodeMetrics(reg prometheus.Registerer) *decodeMetrics {
	return &decodeMetrics{
		consumed:     register(reg, telemetry.NewCounterVec("hermod_bus_consumed_total", "Messages decoded and handed to a handler, by stream (or core subject).", "stream")),
		decodeErrors: register(reg, telemetry.NewCounterVec("hermod_bus_decode_errors_total", "Messages skipped because they did not decode, by stream (or core subject).", "stream")),
	}
}

// register registers c on reg and returns it, or returns the collector
// already registered under the same name, so that several publishers or
// consumers can share one registerer. A nil reg registers nothing. A
// conflicting registration (same name, other labels) leaves c unregistered.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if reg == nil {
		return c
	}
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
	}
	return c
}
