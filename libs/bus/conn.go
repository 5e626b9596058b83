package bus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	neturl "net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hermod/hermod/libs/retry"
	"github.com/hermod/hermod/libs/telemetry"

	"github.com/nats-io/nats.go"
)

// DefaultConnectTimeout bounds Connect when its context has no deadline.
const DefaultConnectTimeout = 10 * time.Second

// dialTimeout bounds one dial and handshake, on connecting and reconnecting.
const dialTimeout = 5 * time.Second

// Connect connects to the NATS server(s) at url (a comma-separated list is
// allowed) under the connection name name. It tries again with backoff
// (WithBackoff) until the first connection succeeds or ctx ends (after
// DefaultConnectTimeout when ctx has no deadline). Once connected, the
// connection reconnects forever with jittered backoff and logs disconnects,
// reconnects and asynchronous errors through the logger (WithLogger). It
// has no reconnect buffer: publishing while it reconnects fails with
// nats.ErrReconnectBufExceeded rather than being held back. The caller
// closes the connection.
func Connect(ctx context.Context, url, name string, opts ...Option) (*nats.Conn, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultConnectTimeout)
		defer cancel()
	}
	o := newOptions(opts)
	log := o.logger.With("connection", name)
	dialer := &connectDialer{}
	dialer.ctx.Store(&ctx)
	defer func() {
		// Reconnects must not use the caller's context, which may end any
		// time.
		background := context.Background()
		dialer.ctx.Store(&background)
	}()
	natsOpts := append(connOptions(name, dialer, o, log), o.natsOpts...)
	shownURL := redactURLs(url)

	bo := o.backoff()
	for attempt := 1; ; attempt++ {
		nc, err := nats.Connect(url, natsOpts...)
		if err == nil {
			log.Info("nats connected", "nats_url", nc.ConnectedUrlRedacted(), "attempts", attempt)
			return nc, nil
		}
		delay := bo.NextBackOff()
		if dl, _ := ctx.Deadline(); time.Until(dl) < delay {
			return nil, fmt.Errorf("connect to nats %s (%d attempts): %w", shownURL, attempt, errors.Join(err, context.DeadlineExceeded))
		}
		log.Debug("nats connect failed; retrying", "error", err, "attempt", attempt, "retry_in", delay)
		if !retry.Sleep(ctx, delay) {
			return nil, fmt.Errorf("connect to nats %s (%d attempts): %w", shownURL, attempt, errors.Join(err, ctx.Err()))
		}
	}
}

// connOptions returns the options of Connect's connections: naming,
// reconnects forever with backoff, no reconnect buffer, and logging.
func connOptions(name string, dialer nats.CustomDialer, o options, log *slog.Logger) []nats.Option {
	asyncErrs := &telemetry.LogLimiter{Every: logInterval}
	var serverURL atomic.Value // the server connected to last, for the disconnect log
	return []nats.Option{
		nats.Name(name),
		nats.Timeout(dialTimeout),
		nats.SetCustomDialer(dialer),
		nats.MaxReconnects(-1),
		nats.CustomReconnectDelay(o.nthBackoff),
		// No reconnect buffer: a publish while reconnecting fails at once
		// instead of being sent after the reconnect, behind the retries of
		// what was lost with the old connection (Publisher keeps its order
		// that way; core NATS events are stale by then anyway).
		nats.ReconnectBufSize(-1),
		nats.PingInterval(20 * time.Second),
		nats.MaxPingsOutstanding(3),
		nats.ConnectHandler(func(nc *nats.Conn) {
			serverURL.Store(nc.ConnectedUrlRedacted())
		}),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err == nil {
				return // closing: ClosedHandler logs it
			}
			url, _ := serverURL.Load().(string)
			log.Warn("nats disconnected", "error", err, "nats_url", url)
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			serverURL.Store(nc.ConnectedUrlRedacted())
			log.Info("nats reconnected", "nats_url", nc.ConnectedUrlRedacted(), "reconnects", nc.Stats().Reconnects)
		}),
		nats.ReconnectErrHandler(func(_ *nats.Conn, err error) {
			log.Debug("nats reconnect attempt failed", "error", err)
		}),
		nats.ClosedHandler(func(*nats.Conn) {
			log.Debug("nats connection closed")
		}),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			ok, suppressed := asyncErrs.Allow()
			if !ok {
				return
			}
			attrs := []any{"error", err, "suppressed", suppressed}
			if sub != nil {
				attrs = append(attrs, "subject", sub.Subject)
			}
			log.Error("nats asynchronous error", attrs...)
		}),
	}
}

// connectDialer dials with the context of Connect until the first connection
// is made, so that canceling it aborts a dial, and without one after.
type connectDialer struct {
	ctx atomic.Pointer[context.Context]
}

// Dial implements nats.CustomDialer.
func (d *connectDialer) Dial(network, address string) (net.Conn, error) {
	nd := net.Dialer{Timeout: dialTimeout}
	return nd.DialContext(*d.ctx.Load(), network, address)
}

// redactURLs hides the passwords of a comma-separated list of server URLs.
func redactURLs(urls string) string {
	parts := strings.Split(urls, ",")
	for i, p := range parts {
		if u, err := neturl.Parse(strings.TrimSpace(p)); err == nil {
			parts[i] = u.Redacted()
		}
	}
	return strings.Join(parts, ",")
}
