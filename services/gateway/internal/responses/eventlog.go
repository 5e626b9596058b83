package responses

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	responsesv1 "github.com/hermod/hermod/libs/api/hermod/responses/v1"
	"github.com/hermod/hermod/libs/openai"
)

// A background response created with stream: true streams live. Its run
// (on whichever gateway the responses service sends it to) writes the
// Responses stream events into the response's event log in the store as
// the model produces them, its last events in the same step as the
// response is stored; every client streaming the response (the one that
// created it, and any that retrieve it with stream=true and
// starting_after, on any gateway, across gateway restarts) tails that log.
// An event's index in the log is its sequence_number.

// Batching of a run's appends: at most this many events or this long.
const (
	sinkBatch    = 32
	sinkInterval = 50 * time.Millisecond
	// tailPoll is how often a tailing client looks for new events, and
	// tailStateEvery how often it also reads the run's state.
	tailPoll       = 100 * time.Millisecond
	tailStateEvery = 500 * time.Millisecond
	// maxPendingEventBytes bounds the events a run holds that the store
	// has not taken (it refuses appends, or is away): past it the run
	// stops rather than the gateway holding the rest of the answer.
	maxPendingEventBytes = 16 << 20
)

// errEventsBehind stops a run whose events the store does not take.
var errEventsBehind = fmt.Errorf("the store has not taken %d bytes of this response's events", maxPendingEventBytes)

// eventSink is the ResponseWriter a streamed background run writes its
// events to: each Write is one event, appended to the log in batches on
// Flush. A non-200 answer (the pool refused the chat completion) is kept
// for the runner.
type eventSink struct {
	ctx       context.Context
	h         *Handler
	id, token string
	header    http.Header
	code      int
	body      bytes.Buffer
	pending   [][]byte
	// pendingBytes is the bytes of pending.
	pendingBytes int
	// next is the log index of pending[0].
	next int
	last time.Time
	err  error
}

func newEventSink(ctx context.Context, h *Handler, id, token string, from int) *eventSink {
	return &eventSink{ctx: ctx, h: h, id: id, token: token, header: http.Header{}, next: from, last: time.Now()}
}

func (e *eventSink) Header() http.Header { return e.header }

func (e *eventSink) WriteHeader(code int) {
	if e.code == 0 {
		e.code = code
	}
}

func (e *eventSink) Write(p []byte) (int, error) {
	if e.code == 0 {
		e.code = http.StatusOK
	}
	if e.code != http.StatusOK {
		return e.body.Write(p)
	}
	if e.pendingBytes+len(p) > maxPendingEventBytes {
		return 0, errEventsBehind
	}
	e.pending = append(e.pending, append([]byte(nil), p...))
	e.pendingBytes += len(p)
	return len(p), nil
}

// Flush appends the pending events once a batch is full or due.
func (e *eventSink) Flush() {
	if len(e.pending) >= sinkBatch || (len(e.pending) > 0 && time.Since(e.last) >= sinkInterval) {
		e.flush()
	}
}

// flush appends every pending event; a failure is kept (err) and the
// events stay pending for the next try.
func (e *eventSink) flush() {
	if len(e.pending) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(e.ctx), e.h.o.StoreTimeout)
	defer cancel()
	_, err := e.h.o.Store.AppendEvents(ctx, &responsesv1.AppendEventsRequest{Id: e.id, RunToken: e.token, From: int64(e.next), Events: e.pending})
	e.last = time.Now()
	if err != nil {
		e.err = err
		return
	}
	e.err = nil
	e.next += len(e.pending)
	e.pending, e.pendingBytes = nil, 0
}

// tail is the pending events and then last, to append with the run's
// completion; committed records that they landed.
func (e *eventSink) tail(last []byte) ([][]byte, int) {
	return append(append([][]byte(nil), e.pending...), last), e.next
}

func (e *eventSink) committed(n int) {
	e.next += n
	e.pending, e.pendingBytes = nil, 0
	e.err = nil
}

// logLength is how many events a response's log holds (an append of
// nothing answers the length).
func (h *Handler) logLength(ctx context.Context, id, token string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, h.o.StoreTimeout)
	defer cancel()
	res, err := h.o.Store.AppendEvents(ctx, &responsesv1.AppendEventsRequest{Id: id, RunToken: token})
	if err != nil {
		return 0, err
	}
	return int(res.GetLength()), nil
}

// finalEvents are the events that end a Responses stream.
var finalEvents = []string{"response.completed", "response.incomplete", "response.failed"}

// eventName is a stored event's type (its "event:" line).
func eventName(frame []byte) string {
	line, _, _ := bytes.Cut(frame, []byte("\n"))
	name, ok := bytes.CutPrefix(line, []byte("event: "))
	if !ok {
		return ""
	}
	return string(name)
}

func isFinal(frame []byte) bool {
	name := eventName(frame)
	for _, f := range finalEvents {
		if name == f {
			return true
		}
	}
	return false
}

// streamBackground streams a background response from its event log,
// from the event after index after (-1: from the start), until the
// stream's final event, or until the client goes. A response whose run
// ended without a final event in the log (it was cancelled, or failed
// before it streamed) ends with response.failed carrying its state; one
// that never streamed (created without stream) is replayed from the
// stored response once it finished.
func (h *Handler) streamBackground(w http.ResponseWriter, r *http.Request, id string, after int) {
	ctx := r.Context()
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flush := func() {
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	}
	flush()
	next, streamed := after+1, false
	var checked time.Time
	ended := false // the run is over: one more read, then the end
	for {
		rctx, cancel := context.WithTimeout(ctx, h.o.StoreTimeout)
		res, err := h.o.Store.ReadEvents(rctx, &responsesv1.ReadEventsRequest{Id: id, From: int64(next)})
		cancel()
		if err == nil {
			for _, ev := range res.GetEvents() {
				_, _ = w.Write(ev)
				next++
				streamed = true
				if isFinal(ev) {
					flush()
					return
				}
			}
			flush()
			if len(res.GetEvents()) > 0 {
				continue
			}
		} else if ctx.Err() == nil {
			h.o.Logger.Warn("responses: could not read a background response's events", "id", id, "err", err)
		}
		if ended {
			h.endStream(w, ctx, id, next, streamed, after)
			flush()
			return
		}
		if time.Since(checked) >= tailStateEvery {
			checked = time.Now()
			sctx, cancel := context.WithTimeout(ctx, h.o.StoreTimeout)
			rec, err := h.load(sctx, id)
			if err == nil {
				rec, err = h.withRunState(sctx, rec)
			}
			cancel()
			if status.Code(err) == codes.NotFound {
				return // deleted while streaming
			}
			if err == nil && !inFlight(rec.Response.Status) {
				ended = true
				continue
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(tailPoll):
		}
	}
}

func inFlight(s string) bool { return s == "queued" || s == "in_progress" }

// endStream ends a background stream whose log holds no final event:
// replayed from the stored response when it never streamed, else a
// response.failed (sequence number next) with the response's state.
func (h *Handler) endStream(w http.ResponseWriter, ctx context.Context, id string, next int, streamed bool, after int) {
	sctx, cancel := context.WithTimeout(ctx, h.o.StoreTimeout)
	defer cancel()
	rec, err := h.load(sctx, id)
	if err == nil {
		rec, err = h.withRunState(sctx, rec)
	}
	if err != nil {
		return
	}
	if !streamed { // nothing read now: did the run stream at all?
		res, err := h.o.Store.ReadEvents(sctx, &responsesv1.ReadEventsRequest{Id: id, Limit: 1})
		streamed = err != nil || len(res.GetEvents()) > 0
	}
	if !streamed {
		replayEvents(w, rec.Response, after)
		return
	}
	failed := *rec.Response
	if failed.Status != "cancelled" {
		failed.Status = "failed"
	}
	if failed.Error == nil {
		failed.Error = &ResponseError{Code: "server_error", Message: "the run ended before it streamed its last event"}
		if failed.Status == "cancelled" {
			failed.Error = nil
		}
	}
	_, _ = w.Write(frameOf("response.failed", next, map[string]any{"response": failed}))
}

// runStreamed serves a background run of a response created with stream:
// true: the events go to the response's log (newEventSink) as the model
// produces them, and the runner gets the outcome. A log that holds events
// already is an earlier run's that broke off (its gateway went away):
// events that were sent cannot be taken back, so the response fails,
// with a last event saying why.
func (h *Handler) runStreamed(w http.ResponseWriter, r *http.Request, t *turn, inner *http.Request) {
	n, err := h.logLength(r.Context(), t.id, t.runToken)
	if !h.commitRun(w, err, t.id) {
		return
	}
	if n > 0 {
		failed := t.response("", "", "failed", nil)
		failed.Output = []OutputItem{}
		failed.Error = &ResponseError{Code: "server_error", Message: "the run streaming this response was interrupted after it had sent events (its gateway went away); create the response again"}
		var tail *eventTail
		if last, err := h.lastEvent(r.Context(), t.id, n); err != nil || !isFinal(last) {
			tail = &eventTail{from: n, events: [][]byte{frameOf("response.failed", n, map[string]any{"response": failed})}}
		}
		if h.commitRun(w, t.put(r.Context(), failed, tail), t.id) {
			writeJSON(w, http.StatusOK, failed)
		}
		return
	}
	sink := newEventSink(r.Context(), h, t.id, t.runToken, 0)
	sw := newStreamWriter(sink, t)
	h.o.Chat.ServeHTTP(sw, inner)
	sw.finish(r.Context())
	switch {
	case sink.code != http.StatusOK:
		// refused before it streamed (nothing is in the log): the
		// runner tries again or fails the response with this answer
		copyHeader(w.Header(), sink.header)
		w.WriteHeader(sink.code)
		_, _ = w.Write(sink.body.Bytes())
	case sw.final == nil:
		sink.flush()
		h.o.Logger.Warn("background stream not stored", "id", t.id, "err", sink.err)
		openai.WriteError(w, http.StatusServiceUnavailable, openai.TypeUnavailable, notStoredCode, "", notStoredMessage, 1)
	default:
		writeJSON(w, http.StatusOK, sw.final)
	}
}

// lastEvent is event n-1 of a response's log.
func (h *Handler) lastEvent(ctx context.Context, id string, n int) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, h.o.StoreTimeout)
	defer cancel()
	res, err := h.o.Store.ReadEvents(ctx, &responsesv1.ReadEventsRequest{Id: id, From: int64(n - 1), Limit: 1})
	if err != nil || len(res.GetEvents()) == 0 {
		return nil, fmt.Errorf("read event %d of %s: %w", n-1, id, err)
	}
	return res.GetEvents()[0], nil
}
