// Package pickerclient is the gateway's client of the picker replicas: it
// spreads Pick calls over them round-robin, moves on to the next replica
// when one cannot be reached or does not answer within the attempt timeout
// (and passes a replica that timed out over for a while), and sends each
// Complete to the replica that took the decision (whose in-flight count
// then drops at once; the others learn it from the completion stream).
package pickerclient

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	pickerv1 "github.com/hermod/hermod/libs/api/hermod/picker/v1"
	"github.com/hermod/hermod/libs/telemetry"
)

// Defaults.
const (
	DefaultPickTimeout     = 2 * time.Second
	DefaultCompleteTimeout = 2 * time.Second
	// DefaultReconnectWait bounds how long a Pick waits for a replica to
	// reconnect when every replica's connection is failing (what a Pick
	// adds to a 503 while every picker is down).
	DefaultReconnectWait = 250 * time.Millisecond
	// DefaultAttemptTimeout bounds a Pick attempt on one replica while
	// others remain to be tried: a Pick takes about a millisecond, so one
	// that takes this long is on a hung or overloaded replica.
	DefaultAttemptTimeout = 500 * time.Millisecond
)

// Reconnection: a replica that comes back is reached within ReconnectMaxDelay
// (gRPC's default backoff grows to 120 s), and a Pick that finds every
// replica failing asks for a new attempt at once, at most once per
// reconnectNudgeEvery (a request storm must not become a dial storm).
const (
	ReconnectMaxDelay   = time.Second
	reconnectBaseDelay  = 100 * time.Millisecond
	reconnectMinConnect = 2 * time.Second
	reconnectNudgeEvery = 100 * time.Millisecond
)

// Client talks to one or more picker replicas. It is safe for concurrent
// use.
type Client struct {
	conns           []*grpc.ClientConn
	clients         []pickerv1.PickerServiceClient
	addrs           []string
	next            atomic.Uint64
	pickTimeout     time.Duration
	attemptTimeout  time.Duration
	completeTimeout time.Duration
	reconnectWait   time.Duration
	nudged          atomic.Int64 // unix nanoseconds of the last reconnect nudge
	ejected         *ejections
	ejections       *prometheus.CounterVec
	log             *slog.Logger
}

// Options configure a Client.
type Options struct {
	// PickTimeout bounds one Pick call (all replicas tried); default
	// DefaultPickTimeout.
	PickTimeout time.Duration
	// AttemptTimeout bounds the attempt on one replica while others
	// remain (the last one tried has what is left of PickTimeout); a
	// replica that runs out of it is passed over for a while. Default
	// DefaultAttemptTimeout.
	AttemptTimeout time.Duration
	// CompleteTimeout bounds one Complete call; default
	// DefaultCompleteTimeout.
	CompleteTimeout time.Duration
	// ReconnectWait bounds how long a Pick waits, within its deadline, for
	// a replica to reconnect when every replica's connection is in
	// TRANSIENT_FAILURE; default DefaultReconnectWait.
	ReconnectWait time.Duration
	// DialOptions are added to the client's own; they carry the transport
	// credentials (bootstrap's Service.GRPCDialOptions: plaintext or TLS,
	// and with tracing every call is a span whose context the picker gets).
	DialOptions []grpc.DialOption
	// Logger logs ejections (slog.Default when nil); Metrics registers
	// hermod_gateway_picker_ejections_total (nil: not registered).
	Logger  *slog.Logger
	Metrics prometheus.Registerer
}

// New connects (lazily, as gRPC does) to the picker replicas at addrs
// (host:port).
func New(addrs []string, o Options) (*Client, error) {
	if len(addrs) == 0 {
		return nil, errors.New("picker client: no picker address")
	}
	if o.PickTimeout <= 0 {
		o.PickTimeout = DefaultPickTimeout
	}
	if o.CompleteTimeout <= 0 {
		o.CompleteTimeout = DefaultCompleteTimeout
	}
	if o.ReconnectWait <= 0 {
		o.ReconnectWait = DefaultReconnectWait
	}
	if o.AttemptTimeout <= 0 {
		o.AttemptTimeout = DefaultAttemptTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	c := &Client{addrs: addrs, pickTimeout: o.PickTimeout, attemptTimeout: o.AttemptTimeout, completeTimeout: o.CompleteTimeout,
		reconnectWait: o.ReconnectWait, ejected: newEjections(len(addrs)), log: o.Logger,
		ejections: telemetry.NewCounterVec("hermod_gateway_picker_ejections_total",
			"Picker replicas passed over after a Pick attempt ran out of the attempt timeout (hung or overloaded), by replica address.", "picker")}
	if o.Metrics != nil {
		if err := o.Metrics.Register(c.ejections); err != nil {
			return nil, fmt.Errorf("picker client: %w", err)
		}
	}
	for _, a := range addrs {
		opts := []grpc.DialOption{
			grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 30 * time.Second, Timeout: 10 * time.Second}),
		}
		opts = append(opts, reconnectParams())
		opts = append(opts, o.DialOptions...)
		conn, err := grpc.NewClient(a, opts...)
		if err != nil {
			_ = c.Close()
			return nil, fmt.Errorf("picker client for %s: %w", a, err)
		}
		conn.Connect()
		c.conns = append(c.conns, conn)
		c.clients = append(c.clients, pickerv1.NewPickerServiceClient(conn))
	}
	return c, nil
}

// Decision is a Pick's answer and the replica that gave it.
type Decision struct {
	*pickerv1.PickResponse
	replica int
}

// Pick asks a replica for a decision. The next replica is tried when one
// is not ready (it says so), cannot be reached (a transport failure) or
// does not answer within the attempt timeout (then it is passed over for
// a while: replicas passed over are tried last); the pickers' other
// answers (no ready endpoint, shed, bad request) are the same on every
// replica and are returned as they are.
func (c *Client) Pick(ctx context.Context, req *pickerv1.PickRequest) (Decision, error) {
	ctx, cancel := context.WithTimeout(ctx, c.pickTimeout)
	defer cancel()
	c.awaitReconnect(ctx)
	first := int(c.next.Add(1) % uint64(len(c.clients)))
	var buf [8]int
	order := c.ejected.order(first, buf[:0])
	var err error
	for i, r := range order {
		if i > 0 && c.conns[r].GetState() == connectivity.TransientFailure {
			continue
		}
		var resp *pickerv1.PickResponse
		resp, err = c.attempt(ctx, r, req, i < len(order)-1)
		if err == nil {
			c.ejected.answered(r)
			return Decision{PickResponse: resp, replica: r}, nil
		}
		if ctx.Err() != nil {
			return Decision{}, err
		}
		if status.Code(err) == codes.DeadlineExceeded { // the attempt's own deadline
			c.eject(r, err)
			continue
		}
		if !retryElsewhere(err) {
			return Decision{}, err
		}
	}
	return Decision{}, err
}

// attempt is one Pick on replica r, bounded by the attempt timeout when
// others remain to be tried.
func (c *Client) attempt(ctx context.Context, r int, req *pickerv1.PickRequest, bounded bool) (*pickerv1.PickResponse, error) {
	if bounded {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.attemptTimeout)
		defer cancel()
	}
	return c.clients[r].Pick(ctx, req)
}

// eject passes replica r over after its attempt timed out.
func (c *Client) eject(r int, err error) {
	d := c.ejected.eject(r)
	c.ejections.WithLabelValues(c.addrs[r]).Inc()
	c.log.Warn("picker replica did not answer a Pick in time; passing it over", "picker", c.addrs[r],
		"attempt_timeout", c.attemptTimeout, "for", d, "error", err)
}

// retryElsewhere says whether another replica may place a request this one
// did not: it is not ready, or the call failed in transport. (A transport
// failure after the picker decided loses that decision's answer; its
// in-flight count then lasts until the request timeout. A client error is
// worse.)
func retryElsewhere(err error) bool {
	st := status.Convert(err)
	if st.Code() != codes.Unavailable {
		return false
	}
	reason := FailureReason(err)
	return reason == "" || reason == pickerv1.PickFailure_PICK_FAILURE_NOT_READY.String()
}

// FailureReason returns the PickFailure name a picker gave an error (the
// reason of its google.rpc.ErrorInfo), or "" for an error no picker made.
func FailureReason(err error) string {
	for _, d := range status.Convert(err).Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == "hermod.picker" {
			return info.GetReason()
		}
	}
	return ""
}

// Complete reports a finished request to the replica that decided it
// (another one if it is gone or passed over: every replica folds
// completions).
func (c *Client) Complete(ctx context.Context, d Decision, ev *eventsv1.RequestCompleted) error {
	ctx, cancel := context.WithTimeout(ctx, c.completeTimeout)
	defer cancel()
	var buf [8]int
	var err error
	for _, r := range c.ejected.order(d.replica, buf[:0]) {
		if _, err = c.clients[r].Complete(ctx, &pickerv1.CompleteRequest{Completion: ev}); err == nil || ctx.Err() != nil {
			return err
		}
	}
	return err
}

// Ready reports whether some replica's connection is ready (or idle and
// usable); it nudges idle connections to connect.
func (c *Client) Ready() error {
	for _, conn := range c.conns {
		switch conn.GetState() {
		case connectivity.Ready:
			return nil
		case connectivity.Idle:
			conn.Connect()
		}
	}
	return fmt.Errorf("no picker replica connected (%v)", c.addrs)
}

// Close closes the connections.
func (c *Client) Close() error {
	var errs []error
	for _, conn := range c.conns {
		errs = append(errs, conn.Close())
	}
	return errors.Join(errs...)
}
