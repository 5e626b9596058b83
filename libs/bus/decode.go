package bus

import (
	"errors"
	"log/slog"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/hermod/hermod/libs/telemetry"
)

// decoder decodes payloads into new messages of type T, counts what it
// decoded and what it could not, and logs the failures rate-limited.
type decoder[T proto.Message] struct {
	mt       protoreflect.MessageType
	consumed prometheus.Counter
	failed   prometheus.Counter
	errors   atomic.Uint64
	log      *slog.Logger
	limiter  telemetry.LogLimiter
}

// newDecoder returns a decoder for T; label names the stream (or core
// subject) in metrics, log is expected to name it too.
func newDecoder[T proto.Message](label string, reg prometheus.Registerer, log *slog.Logger) (*decoder[T], error) {
	var zero T
	if any(zero) == nil {
		return nil, errors.New("message type must be a concrete protobuf message type such as *eventsv1.RoutingDecision")
	}
	m := newDecodeMetrics(reg)
	return &decoder[T]{
		mt:       zero.ProtoReflect().Type(),
		consumed: m.consumed.WithLabelValues(label),
		failed:   m.decodeErrors.WithLabelValues(label),
		log:      log,
		limiter:  telemetry.LogLimiter{Every: logInterval},
	}, nil
}

// decode returns the message data holds, or ok false if it does not decode
// into T (counted and logged).
func (d *decoder[T]) decode(subject string, data []byte) (msg T, ok bool) {
	msg = d.mt.New().Interface().(T)
	if err := proto.Unmarshal(data, msg); err != nil {
		d.errors.Add(1)
		d.failed.Inc()
		if ok, suppressed := d.limiter.Allow(); ok {
			d.log.Warn("skipping message that does not decode", "subject", subject,
				"type", string(d.mt.Descriptor().FullName()), "bytes", len(data), "error", err, "suppressed", suppressed)
		}
		return msg, false
	}
	d.consumed.Inc()
	return msg, true
}
