package proxy

import (
	"bytes"
	"io"
	"net/http"
	"time"

	"github.com/hermod/hermod/services/gateway/internal/openai"
)

// sseRelay passes a server-sent-event stream through to the client event by
// event: every complete event is written and flushed as soon as it has
// arrived (a partial event waits for its end, which the client could not
// use anyway). On the way it notes the time of the first event, counts
// events, reads the usage chunk and, when the gateway asked for usage the
// client did not, strips that chunk.
type sseRelay struct {
	w          io.Writer
	flush      func()
	stripUsage bool

	pending    []byte
	scanned    int // bytes of pending already searched for an event end
	out        []byte
	firstEvent time.Time
	events     int
	usage      openai.Usage
	haveUsage  bool
}

func newSSERelay(w http.ResponseWriter, stripUsage bool) *sseRelay {
	r := &sseRelay{w: w, stripUsage: stripUsage, flush: func() {}}
	if f, ok := w.(http.Flusher); ok {
		r.flush = f.Flush
	}
	return r
}

// feed takes the next bytes of the upstream stream.
func (r *sseRelay) feed(p []byte) error {
	r.pending = append(r.pending, p...)
	// pending starts at an event and held no event end before p: the first
	// end can only lie in the new bytes (or start in the 3 before them).
	// Events are cut where eventLen cuts them, so the output does not
	// depend on how the stream was split into reads.
	end, from := 0, max(r.scanned-3, 0)
	for {
		n := eventEnd(r.pending[end:], from-end)
		if n < 0 {
			break
		}
		end += n
		from = end
	}
	r.scanned = len(r.pending)
	if end == 0 {
		return nil
	}
	complete := r.pending[:end]
	out := r.scan(complete)
	if len(out) > 0 {
		if _, err := r.w.Write(out); err != nil {
			return err
		}
		r.flush()
	}
	n := copy(r.pending, r.pending[end:])
	r.pending = r.pending[:n]
	r.scanned = n
	return nil
}

// finish writes what is left (a stream that ended without a final blank
// line).
func (r *sseRelay) finish() error {
	if len(r.pending) == 0 {
		return nil
	}
	out := r.scan(r.pending)
	r.pending = r.pending[:0]
	if len(out) == 0 {
		return nil
	}
	_, err := r.w.Write(out)
	r.flush()
	return err
}

var usageKey = []byte(`"usage"`)

// scan accounts the events of b (whole events) and returns what to
// forward: b itself, or b without a stripped usage chunk. Only events that
// mention usage are decoded.
func (r *sseRelay) scan(b []byte) []byte {
	strip := r.stripUsage && bytes.Contains(b, usageKey)
	if strip {
		r.out = r.out[:0]
	}
	for rest := b; len(rest) > 0; {
		n := eventLen(rest)
		ev := rest[:n]
		rest = rest[n:]
		keep := true
		if hasData(ev) {
			var data []byte
			if bytes.Contains(ev, usageKey) || bytes.Contains(ev, doneMarker) {
				data = eventData(ev)
			}
			if data != nil || !bytes.Contains(ev, doneMarker) {
				if r.firstEvent.IsZero() {
					r.firstEvent = time.Now()
				}
				r.events++
			}
			if data != nil {
				if u, usageOnly, ok := openai.ChunkUsage(data); ok {
					r.usage, r.haveUsage = u, true
					if usageOnly && r.stripUsage {
						r.events--
						keep = false
					}
				}
			}
		}
		if strip && keep {
			r.out = append(r.out, ev...)
		}
	}
	if strip {
		return r.out
	}
	return b
}

var doneMarker = []byte("[DONE]")

// hasData reports whether an event has a data line.
func hasData(ev []byte) bool {
	return bytes.HasPrefix(ev, []byte("data:")) || bytes.Contains(ev, []byte("\ndata:"))
}

// eventEnd returns the length of the first event of b, its blank line
// included, or -1 when b holds no whole event. The blank line is searched
// from from on: the caller knows none ends before.
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

// eventData returns the data of an event (its "data:" lines joined), nil
// for none or for the "[DONE]" sentinel.
func eventData(ev []byte) []byte {
	var data []byte
	for len(ev) > 0 {
		line := ev
		if i := bytes.IndexByte(ev, '\n'); i >= 0 {
			line, ev = ev[:i], ev[i+1:]
		} else {
			ev = nil
		}
		line = bytes.TrimSuffix(line, []byte("\r"))
		if v, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			v = bytes.TrimPrefix(v, []byte(" "))
			if data != nil {
				data = append(data, '\n')
			}
			data = append(data, v...)
		}
	}
	if bytes.Equal(data, []byte("[DONE]")) {
		return nil
	}
	return data
}
