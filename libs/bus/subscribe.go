package bus

import (
	"errors"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
)

// Subscription is a typed core NATS subscription. See Subscribe.
type Subscription struct {
	sub       *nats.Subscription
	closeOnce sync.Once
	closeErr  error

	// mu is held around every handler call; closed, set under it by Close,
	// stops further calls.
	mu     sync.Mutex
	closed bool

	// done is closed when the subscription's delivery goroutine has
	// returned.
	done     chan struct{}
	doneOnce sync.Once
}

// Subscribe subscribes to subject (wildcards allowed, such as
// MetricsFilter(pool)) over core NATS and calls handler with every message
// decoded into T and the subject it came on, one call at a time. Messages
// that do not decode are skipped: counted in
// hermod_bus_decode_errors_total{stream=<subject>} and logged, rate-limited.
// Core NATS delivers what is published while the subscription is live, at
// most once. Options: WithLogger, WithRegisterer. handler must not call
// Close.
//
// The subscription stops when Close is called or the connection is closed.
func Subscribe[T proto.Message](nc *nats.Conn, subject string, handler func(T, string), opts ...Option) (*Subscription, error) {
	if nc == nil {
		return nil, errors.New("subscribe: nil nats connection")
	}
	if handler == nil {
		return nil, fmt.Errorf("subscribe %s: nil handler", subject)
	}
	o := newOptions(opts)
	dec, err := newDecoder[T](subject, o.registerer, o.logger.With("subject_filter", subject))
	if err != nil {
		return nil, fmt.Errorf("subscribe %s: %w", subject, err)
	}
	s := &Subscription{done: make(chan struct{})}
	sub, err := nc.Subscribe(subject, func(m *nats.Msg) {
		if o.skip != nil && o.skip(m.Header.Get(jetstream.MsgIDHeader)) {
			return
		}
		v, ok := dec.decode(m.Subject, m.Data)
		if !ok {
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if !s.closed {
			handler(v, m.Subject)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("subscribe %s: %w", subject, err)
	}
	s.sub = sub
	sub.SetClosedHandler(func(string) { s.markDone() })
	if !sub.IsValid() {
		// Closed before the handler was set: it may never be called.
		s.markDone()
	}
	return s, nil
}

func (s *Subscription) markDone() { s.doneOnce.Do(func() { close(s.done) }) }

// Close unsubscribes and waits until a running handler has returned; no
// handler call starts after it.
func (s *Subscription) Close() error {
	s.closeOnce.Do(func() {
		if err := s.sub.Unsubscribe(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) && !errors.Is(err, nats.ErrBadSubscription) {
			s.closeErr = fmt.Errorf("unsubscribe %s: %w", s.sub.Subject, err)
		}
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
	})
	if s.closeErr != nil {
		return s.closeErr // still subscribed: its goroutine runs on
	}
	<-s.done
	return nil
}
