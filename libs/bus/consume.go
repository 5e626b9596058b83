package bus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"

	"github.com/hermod/hermod/libs/retry"
	"github.com/hermod/hermod/libs/telemetry"
)

// Consumer tuning.
const (
	// consumerInactiveThreshold is how long the server keeps the ephemeral
	// consumer of a Consumer that stopped pulling (closed, or cut off).
	consumerInactiveThreshold = 30 * time.Second
	// consumerHeartbeat is how often the server tells an idle consumer it
	// is alive. Two missed ones make the client recreate the consumer from
	// the last delivered sequence: that is how a Consumer survives the loss
	// of the server its consumer lived on while its own connection, to
	// another server of a cluster, stays up.
	consumerHeartbeat = time.Second
	// idleCheck is how long one wait for a message lasts; a Consumer that
	// is not caught up checks the stream again after it (see CaughtUp). It
	// must exceed two heartbeats: the client notices missed heartbeats only
	// within one wait.
	idleCheck = 2*consumerHeartbeat + 500*time.Millisecond
	// errorRetry is the pause after an error the consumer did not recover
	// from by itself.
	errorRetry = time.Second
	// infoTimeout bounds the stream look-ups a Consumer makes on its own.
	infoTimeout = 5 * time.Second
)

// ConsumeOptions say which messages of which stream Consume delivers.
type ConsumeOptions struct {
	// Stream is the stream's name, such as DecisionsStream.
	Stream string
	// FilterSubject restricts the messages to those whose subject matches
	// it, such as DecisionsSubject(pool); "" delivers all.
	FilterSubject string
	// Where to start; at most one may be set, none delivers every message
	// the stream holds. Start delivers the messages stored at or after a
	// time, StartSequence those from a stream sequence on (the one after a
	// projection's snapshot), DeliverNew only those stored after Consume.
	Start         time.Time
	StartSequence uint64
	DeliverNew    bool
	// Logger (default slog.Default()) and Registerer for the
	// hermod_bus_consumed_total and hermod_bus_decode_errors_total metrics
	// (default nil: not registered).
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	// Skip, when set, is asked about each message's Nats-Msg-Id before it
	// is decoded: true passes the message over undecoded (one the handler
	// has already applied, say).
	Skip func(msgID string) bool
}

// Meta describes a delivered stream message.
type Meta struct {
	// Stream and Sequence are the stream and the message's stream sequence.
	Stream   string
	Sequence uint64
	// Subject the message was published on.
	Subject string
	// Published is when the stream stored the message.
	Published time.Time
	// MsgID is the message's Nats-Msg-Id (the event's id), "" if it had none.
	MsgID string
	// Pending is how many messages matching the filter followed it in the
	// stream when it was delivered.
	Pending uint64
}

// Consumer delivers the messages of a stream to a handler. See Consume.
type Consumer struct {
	stream   jetstream.Stream
	opts     ConsumeOptions
	filter   string // the filter, ">" for all
	it       jetstream.MessagesContext
	log      *slog.Logger
	cancel   context.CancelFunc
	done     chan struct{}
	caughtUp chan struct{}

	caughtOnce sync.Once
	target     uint64        // the last pre-existing message to deliver; 0: none
	delivered  atomic.Uint64 // the stream sequence of the last message handled
}

// Consume delivers the messages of a stream, decoded into T, to handler:
// first those the stream holds (from the start ConsumeOptions asks for),
// then new ones as they are stored, in stream order, one call at a time on
// a goroutine owned by the Consumer. handler must not call Close.
//
// Consume uses an ordered consumer: an ephemeral consumer (R1, in memory)
// that the client recreates from the last delivered sequence whenever it
// fails (server restart, reconnect, consumer lost, or two heartbeats missed
// because the cluster node it lived on went away), so that no message is
// delivered twice or skipped (unless the stream's limits removed it
// meanwhile). It needs no replicas of its own: on a replicated stream it
// comes back on a surviving replica.
//
// Messages that do not decode into T are skipped: counted in
// hermod_bus_decode_errors_total{stream} and logged as warnings, at most one
// line per 10 s. The Consumer stops when ctx ends, Close is called or the
// connection is closed; ctx also bounds the set-up calls.
func Consume[T proto.Message](ctx context.Context, js jetstream.JetStream, o ConsumeOptions, handler func(T, Meta)) (*Consumer, error) {
	if js == nil {
		return nil, errors.New("consume: nil JetStream")
	}
	if handler == nil {
		return nil, errors.New("consume: nil handler")
	}
	cfg, err := orderedConfig(o)
	if err != nil {
		return nil, err
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	log := o.Logger.With("stream", o.Stream, "filter_subject", o.FilterSubject)
	dec, err := newDecoder[T](o.Stream, o.Registerer, log)
	if err != nil {
		return nil, fmt.Errorf("consume %s: %w", o.Stream, err)
	}
	// The set-up requests are asked again while unanswered, as when the
	// stream was just created or its cluster is electing a leader; ctx
	// bounds them all.
	stream, err := Lookup(ctx, func(ctx context.Context) (jetstream.Stream, error) { return js.Stream(ctx, o.Stream) })
	if err != nil {
		return nil, fmt.Errorf("consume %s: %w", o.Stream, err)
	}
	c := &Consumer{
		stream:   stream,
		opts:     o,
		filter:   o.FilterSubject,
		log:      log,
		done:     make(chan struct{}),
		caughtUp: make(chan struct{}),
	}
	if c.filter == "" {
		c.filter = ">"
	}

	// What "caught up" means is fixed now, before the consumer exists: the
	// last message matching the filter (and the start) that is already
	// stored.
	if !o.DeliverNew {
		if c.target, err = Lookup(ctx, c.lastPreexisting); err != nil {
			return nil, fmt.Errorf("consume %s: %w", o.Stream, err)
		}
	}
	cons, err := Lookup(ctx, func(ctx context.Context) (jetstream.Consumer, error) { return js.OrderedConsumer(ctx, o.Stream, cfg) })
	if err != nil {
		return nil, fmt.Errorf("consume %s: create consumer: %w", o.Stream, err)
	}
	if info := cons.CachedInfo(); c.target == 0 || (info != nil && info.NumPending == 0) {
		c.markCaughtUp()
	}
	it, err := cons.Messages(jetstream.PullHeartbeat(consumerHeartbeat))
	if err != nil {
		return nil, fmt.Errorf("consume %s: %w", o.Stream, err)
	}
	c.it = it
	runCtx, cancel := context.WithCancel(ctx)
	c.cancel = cancel
	go c.run(runCtx, func(msg jetstream.Msg) { deliver(c, dec, msg, handler) })
	return c, nil
}

// orderedConfig checks o and returns the configuration of its ordered
// consumer.
func orderedConfig(o ConsumeOptions) (jetstream.OrderedConsumerConfig, error) {
	cfg := jetstream.OrderedConsumerConfig{InactiveThreshold: consumerInactiveThreshold}
	if o.Stream == "" {
		return cfg, errors.New("consume: no stream")
	}
	starts := 0
	for _, set := range []bool{!o.Start.IsZero(), o.StartSequence > 0, o.DeliverNew} {
		if set {
			starts++
		}
	}
	if starts > 1 {
		return cfg, fmt.Errorf("consume %s: Start, StartSequence and DeliverNew are exclusive", o.Stream)
	}
	if o.FilterSubject != "" {
		cfg.FilterSubjects = []string{o.FilterSubject}
	}
	switch {
	case o.DeliverNew:
		cfg.DeliverPolicy = jetstream.DeliverNewPolicy
	case o.StartSequence > 0:
		cfg.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
		cfg.OptStartSeq = o.StartSequence
	case !o.Start.IsZero():
		cfg.DeliverPolicy = jetstream.DeliverByStartTimePolicy
		start := o.Start
		cfg.OptStartTime = &start
	default:
		cfg.DeliverPolicy = jetstream.DeliverAllPolicy
	}
	return cfg, nil
}

// CaughtUp is closed once every message that matched the filter and the
// start when Consume was called has been handled (or skipped as malformed):
// a projection rebuilt by replaying the stream is ready then. It is closed
// from the start when there is no such message.
func (c *Consumer) CaughtUp() <-chan struct{} { return c.caughtUp }

// Done is closed when the Consumer has stopped.
func (c *Consumer) Done() <-chan struct{} { return c.done }

// LastSequence returns the stream sequence of the last message handled (or
// skipped), 0 before the first: where a snapshot of a projection stands.
func (c *Consumer) LastSequence() uint64 { return c.delivered.Load() }

// Close stops the Consumer and waits for its goroutine, and so for a running
// handler, to return.
func (c *Consumer) Close() {
	c.cancel()
	<-c.done
}

func (c *Consumer) run(ctx context.Context, handle func(jetstream.Msg)) {
	defer close(c.done)
	defer c.cancel()
	stopIt := context.AfterFunc(ctx, c.it.Stop)
	defer stopIt()
	defer c.it.Stop()
	errLog := telemetry.LogLimiter{Every: logInterval}
	for {
		msg, err := c.it.Next(jetstream.NextMaxWait(idleCheck))
		if ctx.Err() != nil {
			return
		}
		switch {
		case err == nil:
			handle(msg)
		case errors.Is(err, nats.ErrTimeout):
			c.checkIdle(ctx)
		case errors.Is(err, jetstream.ErrMsgIteratorClosed):
			if errors.Is(err, jetstream.ErrConnectionClosed) || errors.Is(err, nats.ErrConnectionClosed) {
				c.log.Warn("nats connection closed; consumer stops")
			}
			return
		default:
			// The ordered consumer recreates itself on the errors it can
			// recover from; what reaches here failed to. Try again shortly.
			if ok, suppressed := errLog.Allow(); ok {
				c.log.Warn("consumer error; retrying", "error", err, "suppressed", suppressed)
			}
			if !retry.Sleep(ctx, errorRetry) {
				return
			}
		}
	}
}

// deliver decodes msg, passes it to handler and advances the caught-up
// state.
func deliver[T proto.Message](c *Consumer, dec *decoder[T], msg jetstream.Msg, handler func(T, Meta)) {
	md, err := msg.Metadata()
	if err != nil {
		c.log.Warn("skipping message without stream metadata", "subject", msg.Subject(), "error", err)
		return
	}
	meta := Meta{
		Stream:    md.Stream,
		Sequence:  md.Sequence.Stream,
		Subject:   msg.Subject(),
		Published: md.Timestamp,
		MsgID:     msg.Headers().Get(jetstream.MsgIDHeader),
		Pending:   md.NumPending,
	}
	if skip := c.opts.Skip; skip == nil || !skip(meta.MsgID) {
		if v, ok := dec.decode(meta.Subject, msg.Data()); ok {
			handler(v, meta)
		}
	}
	c.delivered.Store(meta.Sequence)
	if meta.Sequence >= c.target || meta.Pending == 0 {
		c.markCaughtUp()
	}
}

func (c *Consumer) markCaughtUp() {
	c.caughtOnce.Do(func() { close(c.caughtUp) })
}

// lastPreexisting returns the stream sequence of the last stored message
// that the Consumer will deliver, 0 if there is none.
func (c *Consumer) lastPreexisting(ctx context.Context) (uint64, error) {
	m, err := c.stream.GetLastMsgForSubject(ctx, c.filter)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("get last message for %s: %w", c.filter, err)
	}
	if m.Sequence < c.opts.StartSequence || (!c.opts.Start.IsZero() && m.Time.Before(c.opts.Start)) {
		return 0, nil
	}
	return m.Sequence, nil
}

// checkIdle runs when no message came for a while before the Consumer caught
// up: if the pre-existing messages it still waits for are gone (removed by
// the stream's limits), it is caught up.
func (c *Consumer) checkIdle(ctx context.Context) {
	select {
	case <-c.caughtUp:
		return
	default:
	}
	ctx, cancel := context.WithTimeout(ctx, infoTimeout)
	defer cancel()
	last, err := c.lastPreexisting(ctx)
	if err != nil {
		c.log.Debug("caught-up check failed", "error", err)
		return
	}
	if last == 0 || last <= c.delivered.Load() {
		c.markCaughtUp()
	}
}
