package bus

import (
	"log/slog"
	"time"

	"github.com/cenkalti/backoff/v5"

	"github.com/hermod/hermod/libs/retry"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
)

// Defaults of the options.
const (
	DefaultQueueSize   = 8192
	DefaultMaxPending  = 1024
	DefaultAckTimeout  = 5 * time.Second
	DefaultMaxAttempts = 10
	DefaultMinBackoff  = 50 * time.Millisecond
	DefaultMaxBackoff  = 5 * time.Second
)

// Option configures Connect, NewPublisher and Subscribe; each takes the
// options that concern it and ignores the others.
type Option func(*options)

type options struct {
	logger      *slog.Logger
	registerer  prometheus.Registerer
	queueSize   int
	maxPending  int
	ackTimeout  time.Duration
	maxAttempts int
	minBackoff  time.Duration
	maxBackoff  time.Duration
	natsOpts    []nats.Option
	skip        func(msgID string) bool
}

func newOptions(opts []Option) options {
	o := options{
		logger:      slog.Default(),
		queueSize:   DefaultQueueSize,
		maxPending:  DefaultMaxPending,
		ackTimeout:  DefaultAckTimeout,
		maxAttempts: DefaultMaxAttempts,
		minBackoff:  DefaultMinBackoff,
		maxBackoff:  DefaultMaxBackoff,
	}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// WithLogger sets the logger (default slog.Default()). All options.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) {
		if l != nil {
			o.logger = l
		}
	}
}

// WithRegisterer registers the Prometheus metrics on r (default nil: not
// registered). Metrics of several publishers or subscriptions on one
// registerer are shared, so they add up. NewPublisher and Subscribe.
func WithRegisterer(r prometheus.Registerer) Option {
	return func(o *options) { o.registerer = r }
}

// WithQueueSize bounds the Publisher's queue of events waiting to be
// published (default DefaultQueueSize). NewPublisher.
func WithQueueSize(n int) Option {
	return func(o *options) {
		if n > 0 {
			o.queueSize = n
		}
	}
}

// WithMaxPending bounds the events a Publisher has sent and not yet seen
// acknowledged (default DefaultMaxPending). NewPublisher.
func WithMaxPending(n int) Option {
	return func(o *options) {
		if n > 0 {
			o.maxPending = n
		}
	}
}

// WithAckTimeout sets how long a Publisher waits for a stream's ack before
// it counts the attempt as failed and retries (default DefaultAckTimeout).
// NewPublisher.
func WithAckTimeout(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.ackTimeout = d
		}
	}
}

// WithMaxAttempts sets how often a Publisher tries an event the server
// rejects or does not acknowledge before it drops it (default
// DefaultMaxAttempts). Attempts that fail because the connection is down do
// not count: those events wait for the connection. NewPublisher.
func WithMaxAttempts(n int) Option {
	return func(o *options) {
		if n > 0 {
			o.maxAttempts = n
		}
	}
}

// WithBackoff sets the delays between reconnects (Connect) and between
// retries of failed publishes (NewPublisher): from minDelay, doubling up to
// maxDelay, with +-20% jitter. Defaults DefaultMinBackoff and
// DefaultMaxBackoff; invalid values (minDelay <= 0 or maxDelay < minDelay)
// are ignored.
func WithBackoff(minDelay, maxDelay time.Duration) Option {
	return func(o *options) {
		if minDelay > 0 && maxDelay >= minDelay {
			o.minBackoff, o.maxBackoff = minDelay, maxDelay
		}
	}
}

// WithSkip makes Subscribe ask skip about each message's Nats-Msg-Id
// before decoding it: true passes the message over undecoded (one the
// handler has already applied, say). Subscribe.
func WithSkip(skip func(msgID string) bool) Option {
	return func(o *options) { o.skip = skip }
}

// WithNATSOptions adds options to the nats.Connect call of Connect
// (credentials, TLS, ...); they apply after Connect's own. Connect.
func WithNATSOptions(opts ...nats.Option) Option {
	return func(o *options) { o.natsOpts = append(o.natsOpts, opts...) }
}

// backoff yields growing, jittered delays between retries.
func (o options) backoff() *backoff.ExponentialBackOff {
	return retry.Backoff(o.minBackoff, o.maxBackoff)
}

// nthBackoff returns the delay before the n-th retry (n >= 1) without state, for
// callbacks that get an attempt count.
func (o options) nthBackoff(n int) time.Duration { return retry.Nth(o.minBackoff, o.maxBackoff, n) }

// logInterval is the least time between two rate-limited log lines of one
// kind.
const logInterval = 10 * time.Second
