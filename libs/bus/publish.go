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
	"google.golang.org/protobuf/proto"

	"github.com/hermod/hermod/libs/telemetry"
)

// connPollInterval is how often a Publisher waiting for the connection looks
// at its status besides being told of reconnects.
const connPollInterval = time.Second

// Publisher publishes protobuf events to JetStream streams without ever
// blocking its callers: Publish marshals the event and puts it in a bounded
// queue, and a goroutine owned by the Publisher publishes the queue in order.
//
// The goroutine keeps up to WithMaxPending events in flight, each published
// with a reply subject on which the stream acks it, and settles the acks in
// order, so throughput is not bound by one round trip per event. Every
// event is sent with its id in the Nats-Msg-Id header: when an attempt
// fails (the connection dropped, no ack came within WithAckTimeout, the
// stream refused it), the goroutine stops sending, lets the acks in flight
// settle, and sends the failed events again, oldest first, after a backoff;
// an event that was stored although its ack was lost is dropped by the
// stream's duplicate window. While the connection is down the goroutine
// waits for it and the queue fills; Publish drops (and counts) what does not
// fit.
//
// Order: events are sent in the order Publish accepted them, and retried
// events are sent before any newer one, so the stream stores them in that
// order provided the connection has no reconnect buffer (Connect's
// connections have none; with one, events sent while it reconnects can be
// stored ahead of older ones lost with the old connection). The exception
// is an event the server refuses while a newer one in flight with it
// succeeds (a stream briefly unavailable): it is stored after that one.
//
// The methods are safe for concurrent use.
type Publisher struct {
	nc          *nats.Conn
	o           options
	log         *slog.Logger
	m           *publisherMetrics
	queue       chan event
	status      chan nats.Status   // connection status changes
	acks        chan *nats.Msg     // the streams' acks, on replyPrefix + "*"
	ackSub      *nats.Subscription // delivers into acks
	replyPrefix string

	// mu orders Publish (read-held around enqueueing) and Close (which sets
	// closed with mu held), so that nothing is enqueued after Close.
	mu     sync.RWMutex
	closed bool

	closeOnce sync.Once
	stop      chan context.Context // hands Close's context to run
	done      chan struct{}
	closeErr  error // written by run before done is closed

	published, duplicates, failed, dropped atomic.Uint64
	dropLog, failLog                       telemetry.LogLimiter
}

// event is one queued publish.
type event struct {
	subject string
	id      string
	// msg is the event until the publishing goroutine marshals it into
	// data (encoded), off the caller's path.
	msg      proto.Message
	data     []byte
	encoded  bool
	attempts int // failed attempts that count against MaxAttempts
}

// PublisherStats are a Publisher's counts since it was created.
type PublisherStats struct {
	// Queued is the number of events in the queue.
	Queued int
	// Published counts the events a stream acknowledged, Duplicates those of
	// them it had already stored.
	Published, Duplicates uint64
	// FailedAttempts counts publish attempts that failed.
	FailedAttempts uint64
	// Dropped counts events that were never published (queue full, encode
	// error, refused MaxAttempts times, or left at Close).
	Dropped uint64
}

// NewPublisher starts a Publisher on nc. Options: WithQueueSize,
// WithMaxPending, WithAckTimeout, WithMaxAttempts, WithBackoff, WithLogger,
// WithRegisterer. Close stops it.
func NewPublisher(nc *nats.Conn, opts ...Option) (*Publisher, error) {
	if nc == nil {
		return nil, errors.New("new publisher: nil nats connection")
	}
	o := newOptions(opts)
	p := &Publisher{
		nc:          nc,
		o:           o,
		log:         o.logger,
		m:           newPublisherMetrics(o.registerer),
		queue:       make(chan event, o.queueSize),
		acks:        make(chan *nats.Msg, 2*o.maxPending+64),
		replyPrefix: nc.NewInbox() + ".",
		stop:        make(chan context.Context, 1),
		done:        make(chan struct{}),
		dropLog:     telemetry.LogLimiter{Every: logInterval},
		failLog:     telemetry.LogLimiter{Every: logInterval},
	}
	// A channel subscription has no goroutine of its own: the acks are
	// handled on the Publisher's. If the channel ever overflowed, the acks
	// lost would time out and their events be retried (and deduplicated).
	sub, err := nc.ChanSubscribe(p.replyPrefix+"*", p.acks)
	if err != nil {
		return nil, fmt.Errorf("new publisher: subscribe to acks: %w", err)
	}
	p.ackSub = sub
	p.status = nc.StatusChanged(nats.CONNECTED, nats.RECONNECTING, nats.CLOSED)
	go p.run()
	return p, nil
}

// Publish queues msg for subject with msgID as its Nats-Msg-Id (the
// event's id; an empty msgID disables deduplication). It never blocks: it
// returns false, and counts a drop, when the queue is full or the
// Publisher is closed. msg is marshalled later, by the publishing
// goroutine (off the caller's path): the caller must not change it after;
// one that does not marshal is dropped then, and counted.
func (p *Publisher) Publish(subject, msgID string, msg proto.Message) bool {
	return p.enqueue(event{subject: subject, id: msgID, msg: msg})
}

// PublishEncoded is Publish for an event already encoded (one another
// process built, such as the decision a picker hands its caller): data is
// published as it is. The caller must not change data after.
func (p *Publisher) PublishEncoded(subject, msgID string, data []byte) bool {
	return p.enqueue(event{subject: subject, id: msgID, data: data, encoded: true})
}

func (p *Publisher) enqueue(ev event) bool {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed {
		p.drop(dropClosed, 1, ev.subject, nil)
		return false
	}
	p.m.queued.Inc() // before the send, so that the goroutine's Dec never comes first
	select {
	case p.queue <- ev:
		return true
	default:
		p.m.queued.Dec()
		p.drop(dropQueueFull, 1, ev.subject, nil)
		return false
	}
}

// Stats returns the Publisher's counts.
func (p *Publisher) Stats() PublisherStats {
	return PublisherStats{
		Queued:         len(p.queue),
		Published:      p.published.Load(),
		Duplicates:     p.duplicates.Load(),
		FailedAttempts: p.failed.Load(),
		Dropped:        p.dropped.Load(),
	}
}

// Close stops accepting events, publishes what is queued or in flight until
// that is done or ctx ends, and waits for the Publisher's goroutine. It
// returns an error saying how many events were left unconfirmed if ctx ended
// first. Later calls wait likewise and return the same error.
func (p *Publisher) Close(ctx context.Context) error {
	p.closeOnce.Do(func() {
		p.mu.Lock()
		p.closed = true
		p.mu.Unlock()
		p.stop <- ctx
	})
	<-p.done
	return p.closeErr
}

// drop counts n dropped events and logs, rate-limited.
func (p *Publisher) drop(reason string, n int, subject string, err error) {
	p.dropped.Add(uint64(n))
	p.m.dropped.WithLabelValues(reason).Add(float64(n))
	if ok, suppressed := p.dropLog.Allow(); ok {
		attrs := []any{"reason", reason, "events", n, "suppressed", suppressed}
		if subject != "" {
			attrs = append(attrs, "subject", subject)
		}
		if err != nil {
			attrs = append(attrs, "error", err)
		}
		p.log.Warn("events dropped", attrs...)
	}
}

// PublishCore marshals msg and publishes it on subject over core NATS, fire
// and forget (no stream, no ack): for PodMetrics and ConfigStatus events,
// where the next one replaces a lost one.
func PublishCore(nc *nats.Conn, subject string, msg proto.Message) error {
	data, err := proto.Marshal(msg)
	if err != nil {
		return fmt.Errorf("publish %s: marshal: %w", subject, err)
	}
	if err := nc.Publish(subject, data); err != nil {
		return fmt.Errorf("publish %s: %w", subject, err)
	}
	return nil
}
