package extproc

import (
	"bytes"
	"encoding/json"
)

// Usage is the token accounting a response reports ("usage").
type Usage struct {
	PromptTokens, CachedTokens, CompletionTokens int64
}

// usageJSON is the OpenAI usage object.
type usageJSON struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	Details          *struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

func (u *usageJSON) usage() Usage {
	out := Usage{PromptTokens: max(u.PromptTokens, 0), CompletionTokens: max(u.CompletionTokens, 0)}
	if u.Details != nil {
		out.CachedTokens = max(u.Details.CachedTokens, 0)
	}
	return out
}

// Bounds of the accounting: a JSON body's usage is read from its last
// tailSize bytes (servers put the usage last); an SSE event longer than
// maxEventSize is passed over.
const (
	tailSize     = 64 << 10
	maxEventSize = 64 << 10
)

// Accounting reads what a response says of its tokens as its body passes:
// the usage object of a JSON body, or of a server-sent-event stream's
// chunks, and the number of data events of a stream. Its memory is bounded
// (tailSize or maxEventSize) whatever the body's size; it decodes JSON only
// where a usage object is.
type Accounting struct {
	sse bool
	// tail: the last bytes of a JSON body
	tail []byte
	// pending: the start of an SSE event not yet ended; skipping: an
	// event grew past maxEventSize and is passed over up to its end
	pending  []byte
	skipping bool

	events int
	usage  Usage
	have   bool
}

// NewAccounting returns an Accounting for an SSE stream (sse) or a JSON
// body.
func NewAccounting(sse bool) *Accounting { return &Accounting{sse: sse} }

// Feed takes the next bytes of the body.
func (a *Accounting) Feed(p []byte) {
	if !a.sse {
		a.keepTail(p)
		return
	}
	a.pending = append(a.pending, p...)
	rest := a.pending
	if a.skipping {
		n := eventLen(rest)
		if n < 0 {
			a.pending = append(a.pending[:0], keepEnd(rest)...)
			return
		}
		rest, a.skipping = rest[n:], false
	}
	for {
		n := eventLen(rest)
		if n < 0 {
			break
		}
		a.event(rest[:n])
		rest = rest[n:]
	}
	if len(rest) > maxEventSize {
		a.skipping, rest = true, keepEnd(rest)
	}
	a.pending = append(a.pending[:0], rest...)
}

// keepEnd returns the bytes of b an event end split across reads may
// have started in (its last 3).
func keepEnd(b []byte) []byte { return b[max(len(b)-3, 0):] }

// Finish accounts for what is left: the tail of a JSON body, or a last
// SSE event that had no blank line after it.
func (a *Accounting) Finish() {
	if !a.sse {
		if u, ok := ResponseUsage(a.tail); ok {
			a.usage, a.have = u, true
		}
		return
	}
	if !a.skipping && len(a.pending) > 0 {
		a.event(a.pending)
	}
	a.pending, a.skipping = a.pending[:0], false
}

// Result returns the usage seen (ok false when none was) and the number of
// data events of a stream (not counting "[DONE]").
func (a *Accounting) Result() (u Usage, ok bool, events int) { return a.usage, a.have, a.events }

func (a *Accounting) keepTail(p []byte) {
	if len(p) >= tailSize {
		a.tail = append(a.tail[:0], p[len(p)-tailSize:]...)
		return
	}
	if over := len(a.tail) + len(p) - tailSize; over > 0 {
		a.tail = a.tail[:copy(a.tail, a.tail[over:])]
	}
	a.tail = append(a.tail, p...)
}

var (
	usageKey   = []byte(`"usage"`)
	doneMarker = []byte("[DONE]")
)

// event accounts for one whole SSE event.
func (a *Accounting) event(ev []byte) {
	data, ok := eventData(ev)
	if !ok || bytes.Equal(data, doneMarker) {
		return
	}
	a.events++
	if u, ok := chunkUsage(data); ok {
		a.usage, a.have = u, true
	}
}

// eventLen returns the length of the first event of b with the blank line
// that ends it ("\n\n" or "\r\n\r\n", or a mix), or -1 if b holds no
// event end.
func eventLen(b []byte) int {
	i := bytes.Index(b, []byte("\n\n"))
	j := bytes.Index(b, []byte("\n\r\n"))
	switch {
	case i < 0 && j < 0:
		return -1
	case i < 0 || (j >= 0 && j < i):
		return j + 3
	}
	return i + 2
}

// eventData returns the data of an event (its "data:" lines joined by
// "\n"); ok is false when it has no data line.
func eventData(ev []byte) (data []byte, ok bool) {
	for len(ev) > 0 {
		line := ev
		if i := bytes.IndexByte(ev, '\n'); i >= 0 {
			line, ev = ev[:i], ev[i+1:]
		} else {
			ev = nil
		}
		line = bytes.TrimSuffix(line, []byte("\r"))
		v, found := bytes.CutPrefix(line, []byte("data:"))
		if !found {
			continue
		}
		v = bytes.TrimPrefix(v, []byte(" "))
		if ok {
			data = append(append(data, '\n'), v...)
		} else {
			data, ok = v, true
		}
	}
	return data, ok
}

// chunkUsage reads the usage object of one streamed chunk (the JSON of an
// event's data), when it has one.
func chunkUsage(data []byte) (Usage, bool) {
	if !hasUsageObject(data) {
		return Usage{}, false
	}
	var c struct {
		Usage *usageJSON `json:"usage"`
	}
	if json.Unmarshal(data, &c) != nil || c.Usage == nil {
		return Usage{}, false
	}
	return c.Usage.usage(), true
}

// ResponseUsage reads the usage of a non-streamed JSON response from its
// body or its tail: it decodes the object of the last "usage" member (the
// top-level one, which servers put last) and nothing else. The bytes
// "usage" followed by a quote cannot occur inside a JSON string (its
// quotes would be escaped), so every match is a member name.
func ResponseUsage(body []byte) (Usage, bool) {
	for end := len(body); ; {
		i := bytes.LastIndex(body[:end], usageKey)
		if i < 0 {
			return Usage{}, false
		}
		end = i
		obj, ok := objectAfterKey(body[i+len(usageKey):])
		if !ok {
			continue
		}
		var u *usageJSON
		if err := json.NewDecoder(bytes.NewReader(obj)).Decode(&u); err != nil || u == nil {
			continue // a nested "usage" of another shape: look further back
		}
		return u.usage(), true
	}
}

// objectAfterKey returns b from the '{' that follows a member name's colon,
// if an object follows.
func objectAfterKey(b []byte) ([]byte, bool) {
	b = skipSpace(b)
	if len(b) == 0 || b[0] != ':' {
		return nil, false
	}
	b = skipSpace(b[1:])
	if len(b) == 0 || b[0] != '{' {
		return nil, false
	}
	return b, true
}

// hasUsageObject is a quick test for a "usage" member holding an object,
// so that chunks without one are not decoded.
func hasUsageObject(b []byte) bool {
	for {
		i := bytes.Index(b, usageKey)
		if i < 0 {
			return false
		}
		b = b[i+len(usageKey):]
		if _, ok := objectAfterKey(b); ok {
			return true
		}
	}
}

func skipSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\n' || b[0] == '\r') {
		b = b[1:]
	}
	return b
}
