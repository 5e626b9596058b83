package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/cenkalti/backoff/v5"
	"google.golang.org/protobuf/proto"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// This file holds the Publisher's goroutine. It publishes each event with a
// reply subject of its own (<inbox>.<id>), on which the stream answers with
// its ack, and keeps up to MaxPending events in flight. Acks are matched to
// the window by id and settled oldest first. On a failure (an error ack, no
// ack within the ack timeout, the connection dropping) it stops sending,
// lets the window settle, and retries the failed events before anything
// newer, after a backoff.
//
// It talks core NATS rather than going through the jetstream client's
// asynchronous publish, so that it owns every goroutine and timer involved
// and can be stopped and cleaned up at any time.

// Errors of in-flight publishes.
var (
	errAckTimeout = errors.New("no ack from the stream in time")
	errBadAck     = errors.New("malformed ack")
)

// publisherState is the state of the publishing goroutine.
type publisherState struct {
	win      ring    // sent, ack awaited, oldest first
	nextID   uint64  // the id of the next publish
	backlog  []event // taken from the queue or back for a retry: sent next, oldest first
	failed   []event // failed in the window since the last retry round, oldest first
	halted   bool    // a publish failed: send nothing until the window is empty
	pause    *time.Timer
	ackTimer *time.Timer // fires at the head's ack deadline
	bo       *backoff.ExponentialBackOff
}

func (p *Publisher) run() {
	defer close(p.done)
	defer p.nc.RemoveStatusListener(p.status)
	defer func() { _ = p.ackSub.Unsubscribe() }()
	st := &publisherState{
		win:      newRing(p.o.maxPending),
		nextID:   1,
		ackTimer: time.NewTimer(p.o.ackTimeout),
		bo:       p.o.backoff(),
	}
	defer st.ackTimer.Stop()
	var (
		statusCh  <-chan nats.Status = p.status
		stop                         = p.stop
		flushing  bool
		flushDone <-chan struct{}
		flushCtx  context.Context
	)
	for {
		connected := p.nc.Status() == nats.CONNECTED
		if connected && !st.halted && st.pause == nil {
			p.sendAvailable(st)
		}
		if st.halted && st.win.len() == 0 {
			// Every publish in flight is settled: retry the failed ones
			// before anything newer, after a backoff.
			st.backlog = append(st.failed, st.backlog...)
			st.failed = nil
			st.halted = false
			st.pause = time.NewTimer(st.bo.NextBackOff())
		}
		if flushing {
			if st.win.len() == 0 && len(st.backlog) == 0 && len(p.queue) == 0 {
				return
			}
			if p.nc.IsClosed() {
				p.abandon(st, nats.ErrConnectionClosed)
				return
			}
		}

		var (
			queue  <-chan event
			pause  <-chan time.Time
			poll   <-chan time.Time
			status = statusCh
		)
		if connected && !st.halted && st.pause == nil && len(st.backlog) == 0 && st.win.len() < p.o.maxPending {
			queue = p.queue
		}
		if st.pause != nil {
			pause = st.pause.C
		}
		if !connected {
			poll = time.After(connPollInterval)
		}
		select {
		case m := <-p.acks:
			p.handleAck(st, m)
			// Settle what else has arrived before waking the sender.
			for more := true; more; {
				select {
				case m := <-p.acks:
					p.handleAck(st, m)
				default:
					more = false
				}
			}
			p.settle(st)
		case <-st.ackTimer.C:
			p.expire(st)
		case ev := <-queue:
			p.m.queued.Dec()
			st.backlog = append(st.backlog, ev)
		case <-pause:
			st.pause = nil
		case s, ok := <-status:
			if !ok {
				statusCh = nil // closed: rely on polling
			} else if s == nats.RECONNECTING {
				// The acks of what is in flight are lost with the
				// connection: retry it all (what was stored is dropped as a
				// duplicate).
				p.failPending(st, nats.ErrDisconnected)
			}
		case <-poll:
		case ctx := <-stop:
			stop = nil
			flushing, flushCtx, flushDone = true, ctx, ctx.Done()
		case <-flushDone:
			p.abandon(st, flushCtx.Err())
			return
		}
	}
}

// sendAvailable sends the backlog and then the queue until the window is
// full, either is empty, or a send fails.
func (p *Publisher) sendAvailable(st *publisherState) {
	for st.win.len() < p.o.maxPending {
		var ev event
		if len(st.backlog) > 0 {
			ev = st.backlog[0]
			st.backlog = st.backlog[1:]
		} else {
			select {
			case ev = <-p.queue:
				p.m.queued.Dec()
			default:
				return
			}
		}
		if !ev.encoded {
			data, err := proto.Marshal(ev.msg)
			if err != nil {
				p.drop(dropEncode, 1, ev.subject, err)
				continue
			}
			ev.data, ev.msg, ev.encoded = data, nil, true
		}
		id := st.nextID
		m := &nats.Msg{Subject: ev.subject, Reply: p.replyPrefix + strconv.FormatUint(id, 36), Data: ev.data}
		if ev.id != "" {
			m.Header = nats.Header{jetstream.MsgIDHeader: []string{ev.id}}
		}
		if err := p.nc.PublishMsg(m); err != nil {
			p.fail(st, ev, err, true)
			return
		}
		st.nextID++
		if st.win.len() == 0 {
			st.ackTimer.Reset(p.o.ackTimeout)
		}
		st.win.push(inflight{ev: ev, id: id, sent: time.Now()})
	}
}

// handleAck records the ack m in its window entry; acks of entries no longer
// in the window (expired, retried) are ignored.
func (p *Publisher) handleAck(st *publisherState, m *nats.Msg) {
	id, err := strconv.ParseUint(m.Subject[len(p.replyPrefix):], 36, 64)
	if err != nil {
		return
	}
	e := st.win.byID(id)
	if e == nil || e.state != ackPending {
		return
	}
	dup, err := parseAck(m)
	if err != nil {
		e.state, e.err = ackFailed, err
		return
	}
	e.state, e.dup = ackOK, dup
}

// parseAck reads a stream's answer to a publish: whether the stream already
// held the message, or why it did not store it.
func parseAck(m *nats.Msg) (duplicate bool, err error) {
	if len(m.Data) == 0 && m.Header.Get("Status") == "503" {
		return false, nats.ErrNoResponders // no stream takes the subject (or none is up)
	}
	var ack struct {
		Stream    string              `json:"stream"`
		Duplicate bool                `json:"duplicate"`
		Error     *jetstream.APIError `json:"error"`
	}
	if err := json.Unmarshal(m.Data, &ack); err != nil {
		return false, fmt.Errorf("%w: %w", errBadAck, err)
	}
	if ack.Error != nil {
		return false, ack.Error
	}
	if ack.Stream == "" {
		return false, fmt.Errorf("%w: %q", errBadAck, m.Data)
	}
	return ack.Duplicate, nil
}

// settle pops the settled entries at the head of the window.
func (p *Publisher) settle(st *publisherState) {
	for st.win.len() > 0 && st.win.head().state != ackPending {
		e := st.win.pop()
		if e.state == ackOK {
			p.acked(e.dup)
			st.bo.Reset()
			continue
		}
		p.fail(st, e.ev, e.err, false)
	}
}

// expire fails the entries whose ack is overdue and arms the timer for the
// next deadline.
func (p *Publisher) expire(st *publisherState) {
	now := time.Now()
	st.win.each(func(e *inflight) {
		if e.state == ackPending && now.Sub(e.sent) >= p.o.ackTimeout {
			e.state, e.err = ackFailed, errAckTimeout
		}
	})
	p.settle(st)
	if st.win.len() > 0 {
		st.ackTimer.Reset(max(time.Until(st.win.head().sent.Add(p.o.ackTimeout)), time.Millisecond))
	}
}

// failPending fails every entry still waiting for its ack.
func (p *Publisher) failPending(st *publisherState, err error) {
	st.win.each(func(e *inflight) {
		if e.state == ackPending {
			e.state, e.err = ackFailed, err
		}
	})
	p.settle(st)
}

func (p *Publisher) acked(dup bool) {
	p.published.Add(1)
	p.m.published.Inc()
	if dup {
		p.duplicates.Add(1)
		p.m.duplicates.Inc()
	}
}

// fail handles a failed attempt of ev: it halts sending and keeps ev for the
// retry round, or drops it if it cannot succeed or ran out of attempts.
// unsent says the attempt failed before ev was sent, so that ev is newer
// than everything in the window.
func (p *Publisher) fail(st *publisherState, ev event, err error, unsent bool) {
	p.failed.Add(1)
	p.m.failed.Inc()
	st.halted = true
	switch {
	case permanentPublishError(err):
		p.drop(dropRejected, 1, ev.subject, err)
		return
	case !connectionError(err):
		ev.attempts++
		if ev.attempts >= p.o.maxAttempts {
			p.drop(dropRejected, 1, ev.subject, fmt.Errorf("after %d attempts: %w", ev.attempts, err))
			return
		}
	}
	if ok, suppressed := p.failLog.Allow(); ok {
		p.log.Warn("publish failed; retrying", "subject", ev.subject, "msg_id", ev.id, "error", err,
			"attempts", ev.attempts, "suppressed", suppressed)
	}
	if unsent {
		// Newer than the window, older than the backlog.
		st.backlog = append([]event{ev}, st.backlog...)
		return
	}
	st.failed = append(st.failed, ev)
}

// abandon drops everything not yet confirmed when Close's context ended (or
// the connection closed for good) and records the close error.
func (p *Publisher) abandon(st *publisherState, cause error) {
	n := st.win.len() + len(st.failed) + len(st.backlog)
	for drained := false; !drained; {
		select {
		case <-p.queue:
			p.m.queued.Dec()
			n++
		default:
			drained = true
		}
	}
	if st.pause != nil {
		st.pause.Stop()
	}
	if n == 0 {
		return
	}
	p.drop(dropShutdown, n, "", cause)
	p.closeErr = fmt.Errorf("close publisher: %d events not confirmed: %w", n, cause)
}

// connectionError says whether err means the connection was down: such
// attempts wait for it and do not count against MaxAttempts.
func connectionError(err error) bool {
	return errors.Is(err, nats.ErrDisconnected) ||
		errors.Is(err, nats.ErrConnectionClosed) ||
		errors.Is(err, nats.ErrConnectionReconnecting) ||
		errors.Is(err, nats.ErrConnectionDraining) ||
		errors.Is(err, nats.ErrReconnectBufExceeded)
}

// permanentPublishError says whether err means the event can never be
// published as it is.
func permanentPublishError(err error) bool {
	return errors.Is(err, nats.ErrMaxPayload) ||
		errors.Is(err, nats.ErrBadSubject) ||
		errors.Is(err, nats.ErrInvalidMsg)
}
