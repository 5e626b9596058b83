package openai

import (
	"bytes"
	"encoding/json"
	"time"
)

// Bounds of the accounting: a JSON body's usage is read from its last
// TailBytes (servers put the usage last); a server-sent event longer than
// MaxEventBytes is passed on unread.
const (
	TailBytes     = 64 << 10
	MaxEventBytes = 64 << 10
)

// Observed is what an Accountant saw of a response.
type Observed struct {
	// FirstToken is when the first event of a stream arrived (the first
	// bytes of another body); zero if none did.
	FirstToken time.Time
	// Events counts a stream's data events ("[DONE]" and a stripped
	// usage chunk not counted).
	Events int
	// Usage is the response's usage object, when HaveUsage.
	Usage     Usage
	HaveUsage bool
	// Done: a stream's "[DONE]" sentinel arrived, so the stream ended as
	// its server meant it to; a stream that ends without it broke off.
	Done bool
}

// Accountant follows a response body as it passes to the client: the
// events of a server-sent-event stream (framing, the first one's time,
// the usage chunk) or the usage at the tail of a JSON body. Its memory is
// bounded whatever the body's size, and it decodes JSON only where a
// usage object is. Not safe for concurrent use.
type Accountant struct {
	sse        bool
	stripUsage bool
	// messages: the stream is Anthropic's (message_start ...
	// message_stop events), not OpenAI's chunks
	messages bool
	now      func() time.Time

	// a stream: pending holds the bytes not yet passed on, from the start
	// of an event; the first done of them were returned by the last Feed;
	// scanned of them were searched for an event end. skipping: an event
	// grew past MaxEventBytes and passes on unread up to its end, whose
	// first bytes may be among edge, the last bytes passed.
	pending  []byte
	done     int
	scanned  int
	skipping bool
	edge     []byte
	out      []byte
	join     []byte

	// a JSON body: its last TailBytes
	tail []byte

	seen Observed
}

// NewAccountant returns an Accountant for a server-sent-event stream (sse)
// or a JSON body. With stripUsage a stream's usage-only chunk is accounted
// but not passed on (the gateway asked for usage the client did not).
func NewAccountant(sse, stripUsage bool) *Accountant {
	return NewAccountantFor(APIChatCompletions, sse, stripUsage)
}

// NewAccountantFor returns an Accountant for the answer of api: an
// Anthropic Messages stream ends with message_stop, not [DONE], carries
// its input tokens in message_start and its output tokens in
// message_delta, and its first token is its first content_block_delta.
// Its usage is never stripped (it always comes).
func NewAccountantFor(api API, sse, stripUsage bool) *Accountant {
	messages := api.Anthropic()
	return &Accountant{sse: sse, stripUsage: stripUsage && sse && !messages, messages: messages, now: time.Now}
}

// Feed takes the next bytes of the body and returns those to pass on now:
// p itself for a JSON body; for a stream, its whole events so far (a
// stripped usage chunk left out), and the bytes of an over-long event as
// they come. A partial event waits for its end, which the client could not
// use anyway. The result is valid until the next call.
func (a *Accountant) Feed(p []byte) []byte {
	if !a.sse {
		if len(p) > 0 && a.seen.FirstToken.IsZero() {
			a.seen.FirstToken = a.now()
		}
		a.keepTail(p)
		return p
	}
	if a.done > 0 {
		n := copy(a.pending, a.pending[a.done:])
		a.pending, a.scanned, a.done = a.pending[:n], n, 0
	}
	var passed []byte
	if a.skipping {
		n := endAcross(a.edge, p)
		if n < 0 {
			a.edge = lastBytes(a.edge, p)
			return p
		}
		a.skipping, a.edge = false, a.edge[:0]
		passed, p = p[:n], p[n:]
	}
	a.pending = append(a.pending, p...)
	// pending held no event end before p: the first can only lie in the
	// new bytes (or start in the 3 before them).
	end, from := 0, max(a.scanned-3, 0)
	for {
		n := eventEnd(a.pending[end:], from-end)
		if n < 0 {
			break
		}
		end += n
		from = end
	}
	a.scanned = len(a.pending)
	out, copied := a.events(a.pending[:end])
	if rest := a.pending[end:]; len(rest) > MaxEventBytes {
		a.startSkip(rest)
		if copied {
			out = append(out, rest...)
			a.out = out
		} else {
			out = a.pending
		}
		end = len(a.pending)
	}
	a.done = end
	if passed != nil {
		a.join = append(append(a.join[:0], passed...), out...)
		return a.join
	}
	return out
}

// Finish accounts for what is left and returns what to pass on: the last
// event of a stream that ended without a blank line.
func (a *Accountant) Finish() []byte {
	if !a.sse {
		if u, ok := ResponseUsage(a.tail); ok {
			a.seen.Usage, a.seen.HaveUsage = u, true
		}
		return nil
	}
	rest := a.pending[a.done:]
	a.done = len(a.pending)
	if a.skipping || len(rest) == 0 {
		return nil
	}
	out, _ := a.events(rest)
	return out
}

// Broken ends a stream that broke off before its "[DONE]" (its body
// failed, or ended early) and returns what to pass on: e as an error
// event. An event left incomplete is dropped, never passed on; one that
// was passing unread (longer than MaxEventBytes) is ended first, so that
// the error is an event of its own.
func (a *Accountant) Broken(e *Error) []byte {
	a.done = len(a.pending)
	ev := e.Event()
	if a.skipping {
		a.skipping, a.edge = false, a.edge[:0]
		ev = append([]byte("\n\n"), ev...)
	}
	return ev
}

// Observed returns what was seen so far.
func (a *Accountant) Observed() Observed { return a.seen }

func (a *Accountant) keepTail(p []byte) {
	if len(p) >= TailBytes {
		a.tail = append(a.tail[:0], p[len(p)-TailBytes:]...)
		return
	}
	if over := len(a.tail) + len(p) - TailBytes; over > 0 {
		a.tail = a.tail[:copy(a.tail, a.tail[over:])]
	}
	a.tail = append(a.tail, p...)
}

// startSkip passes over an event grown past MaxEventBytes: it counts as a
// data event, unread.
func (a *Accountant) startSkip(ev []byte) {
	a.skipping = true
	a.edge = lastBytes(a.edge[:0], ev)
	a.noteEvent()
}

func (a *Accountant) noteEvent() {
	if a.seen.FirstToken.IsZero() {
		a.seen.FirstToken = a.now()
	}
	a.seen.Events++
}

var doneMarker = []byte("[DONE]")

// events accounts the whole events of b and returns what to pass on: b
// itself, or (copied) b without a stripped usage chunk.
func (a *Accountant) events(b []byte) (out []byte, copied bool) {
	strip := a.stripUsage && bytes.Contains(b, usageKey)
	if strip {
		a.out = a.out[:0]
	}
	for rest := b; len(rest) > 0; {
		n := eventLen(rest)
		ev := rest[:n]
		rest = rest[n:]
		if keep := a.event(ev); strip && keep {
			a.out = append(a.out, ev...)
		}
	}
	if strip {
		return a.out, true
	}
	return b, false
}

// event accounts one event and says whether to pass it on.
func (a *Accountant) event(ev []byte) (keep bool) {
	if !hasData(ev) {
		return true
	}
	if a.messages {
		a.messagesEvent(ev)
		return true
	}
	if !bytes.Contains(ev, usageKey) && !bytes.Contains(ev, doneMarker) {
		a.noteEvent()
		return true
	}
	data, ok := eventData(ev)
	if !ok {
		a.seen.Done = true // [DONE]
		return true
	}
	a.noteEvent()
	if u, usageOnly, ok := ChunkUsage(data); ok {
		a.seen.Usage, a.seen.HaveUsage = u, true
		if usageOnly && a.stripUsage {
			a.seen.Events--
			return false
		}
	}
	return true
}

// hasData reports whether an event has a data line.
func hasData(ev []byte) bool {
	return bytes.HasPrefix(ev, []byte("data:")) || bytes.Contains(ev, []byte("\ndata:"))
}

// eventEnd returns the length of the first event of b with the blank line
// that ends it ("\n\n" or "\r\n\r\n", or a mix), or -1 when b holds no
// event end. The blank line is searched from from on: the caller knows
// none ends before.
func eventEnd(b []byte, from int) int {
	i := bytes.Index(b[from:], []byte("\n\n"))
	j := bytes.Index(b[from:], []byte("\n\r\n"))
	switch {
	case i < 0 && j < 0:
		return -1
	case i < 0 || (j >= 0 && j < i):
		return from + j + 3
	}
	return from + i + 2
}

// eventLen returns the length of the first event of b, its blank line
// included (all of b when it has none).
func eventLen(b []byte) int {
	if n := eventEnd(b, 0); n >= 0 {
		return n
	}
	return len(b)
}

// endAcross returns the length of the bytes of p up to the end of the
// event they continue, or -1 when p does not end it. The event's last
// bytes before p are in edge (at most 3), where its blank line may start.
func endAcross(edge, p []byte) int {
	var w [6]byte
	k := copy(w[:], edge)
	m := copy(w[k:], p)
	if n := eventEnd(w[:k+m], 0); n > k {
		return n - k
	}
	return eventEnd(p, 0)
}

// lastBytes returns the last 3 bytes of edge followed by p, in edge's
// storage.
func lastBytes(edge, p []byte) []byte {
	if len(p) >= 3 {
		return append(edge[:0], p[len(p)-3:]...)
	}
	edge = append(edge, p...)
	return edge[:copy(edge, edge[max(len(edge)-3, 0):])]
}

// eventData returns the data of an event (its "data:" lines joined by
// "\n"); ok is false for an event without data and for the "[DONE]"
// sentinel.
func eventData(ev []byte) (data []byte, ok bool) {
	for len(ev) > 0 {
		line := ev
		if i := bytes.IndexByte(ev, '\n'); i >= 0 {
			line, ev = ev[:i], ev[i+1:]
		} else {
			ev = nil
		}
		line = bytes.TrimSuffix(line, []byte("\r"))
		if v, found := bytes.CutPrefix(line, []byte("data:")); found {
			v = bytes.TrimPrefix(v, []byte(" "))
			if ok {
				data = append(data, '\n')
			}
			data, ok = append(data, v...), true
		}
	}
	return data, ok && !bytes.Equal(data, doneMarker)
}

// Anthropic stream event types the accounting reads. A quoted type name
// cannot occur inside a JSON string (its quotes would be escaped), so a
// match is the event's own "type" (or a member name no event has).
var (
	contentDeltaType = []byte(`"content_block_delta"`)
	messageStopType  = []byte(`"message_stop"`)
)

// messagesEvent accounts one event of an Anthropic Messages stream.
func (a *Accountant) messagesEvent(ev []byte) {
	switch {
	case bytes.Contains(ev, contentDeltaType):
		a.noteEvent()
	case bytes.Contains(ev, messageStopType):
		a.seen.Done = true
	case bytes.Contains(ev, usageKey):
		data, ok := eventData(ev)
		if !ok {
			return
		}
		if u, ok := messagesEventUsage(data, a.seen.Usage); ok {
			a.seen.Usage, a.seen.HaveUsage = u, true
		}
	}
}

// messagesEventUsage folds the usage of a message_start event (its
// message's input tokens) or of a message_delta event (the output tokens
// so far, and input tokens where the server repeats them) into u.
func messagesEventUsage(data []byte, u Usage) (Usage, bool) {
	var ev struct {
		Type    string `json:"type"`
		Message struct {
			Usage *usageJSON `json:"usage"`
		} `json:"message"`
		Usage *usageJSON `json:"usage"`
	}
	if json.Unmarshal(data, &ev) != nil {
		return u, false
	}
	got := ev.Usage
	if ev.Type == "message_start" {
		got = ev.Message.Usage
	}
	if got == nil {
		return u, false
	}
	return got.foldAnthropic(u), true
}
