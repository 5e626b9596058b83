package coord

import (
	"crypto/tls"
	"log/slog"
	"time"

	"github.com/cenkalti/backoff/v5"

	"github.com/hermod/hermod/libs/retry"
)

// Defaults of the options.
const (
	DefaultRequestTimeout = 5 * time.Second
	DefaultMinBackoff     = 100 * time.Millisecond
	DefaultMaxBackoff     = 5 * time.Second
)

// Option configures the calls of this package that talk to etcd: Register,
// WatchEndpoints, LoadSnapshot, ListEndpoints, WatchConfig, Campaign, Join,
// WatchMembers and ListMembers. An option that does not apply to a call is
// ignored by it.
type Option func(*options)

type options struct {
	logger         *slog.Logger
	requestTimeout time.Duration
	minBackoff     time.Duration
	maxBackoff     time.Duration
	address        string

	// NewClient's connection security (WithTLS, WithCredentials).
	tls                *tls.Config
	username, password string

	// afterList runs in a Watcher after every list, before the watch starts
	// (tests use it to force a compaction in between).
	afterList func()
}

func newOptions(opts []Option) options {
	o := options{
		logger:         slog.Default(),
		requestTimeout: DefaultRequestTimeout,
		minBackoff:     DefaultMinBackoff,
		maxBackoff:     DefaultMaxBackoff,
	}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option {
	return func(o *options) {
		if l != nil {
			o.logger = l
		}
	}
}

// WithRequestTimeout bounds each etcd request that a background goroutine
// makes on its own (re-registrations, re-lists, leader keepalives), the
// revokes of Close and each step of a Campaign; calls that take a context
// from the caller use its deadline. Default DefaultRequestTimeout.
func WithRequestTimeout(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.requestTimeout = d
		}
	}
}

// WithAddress sets the address a member advertises in its membership value
// (Join); default none.
func WithAddress(addr string) Option {
	return func(o *options) { o.address = addr }
}

// WithRetryBackoff sets the delays between retries of a failed
// re-registration, re-list or campaign: from minDelay, doubling up to maxDelay, with
// jitter. Defaults DefaultMinBackoff and DefaultMaxBackoff; invalid values
// (minDelay <= 0 or maxDelay < minDelay) are ignored.
func WithRetryBackoff(minDelay, maxDelay time.Duration) Option {
	return func(o *options) {
		if minDelay > 0 && maxDelay >= minDelay {
			o.minBackoff, o.maxBackoff = minDelay, maxDelay
		}
	}
}

// backoff yields the delays between retries.
func (o options) backoff() *backoff.ExponentialBackOff {
	return retry.Backoff(o.minBackoff, o.maxBackoff)
}
