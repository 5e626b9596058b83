// Package reqbody reads request bodies the one way every gateway handler
// does: bounded in size, into a buffer that grows with the bytes received
// (never with the length a client declared), under one read deadline
// per body that holds until the connection is released, net/http's
// reading of what a handler left unread included, and within a
// process-wide budget of buffered bytes (Budget), so that memory is
// bounded whatever the number of connections.
package reqbody

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/hermod/hermod/libs/openai"
)

// DefaultTimeout bounds the arrival of a body when nothing in front set
// one (Bound).
const DefaultTimeout = time.Minute

// ErrTimeout is the error of a body that did not arrive within its
// deadline.
var ErrTimeout = errors.New("the request body did not arrive in time")

// ErrBusy is the error of a body that did not fit in the budget.
var ErrBusy = errors.New("the gateway holds as many request bytes as it may: try again shortly")

// Budget bounds the bytes of request bodies held at once by every
// request of the process: a buffer grows only when the budget has room,
// and gives its bytes back when its request ends. Safe for concurrent
// use; a nil Budget bounds nothing.
type Budget struct {
	max  int64
	used atomic.Int64
}

// NewBudget returns a budget of max bytes (0 or less: nil, no bound).
func NewBudget(max int64) *Budget {
	if max <= 0 {
		return nil
	}
	return &Budget{max: max}
}

// Used is how many bytes bodies hold now.
func (b *Budget) Used() int64 {
	if b == nil {
		return 0
	}
	return b.used.Load()
}

func (b *Budget) reserve(n int64) bool {
	if b == nil {
		return true
	}
	if b.used.Add(n) > b.max {
		b.used.Add(-n)
		return false
	}
	return true
}

func (b *Budget) release(n int64) {
	if b != nil && n > 0 {
		b.used.Add(-n)
	}
}

// Bound gives every request with a body one read deadline: timeout from
// the request's arrival, for the handler's reads and for net/http's
// reading of what the handler left unread. A body read to its end lifts
// the deadline (a long streamed answer follows; net/http then watches the
// connection for the client leaving, which a passed deadline would take
// for a failure); a body that fails keeps it, and the connection closes
// after the answer. Handlers read bodies with Read, within budget (nil:
// none), whose bytes a request holds until it has been served.
func Bound(next http.Handler, timeout time.Duration, budget *Budget) http.Handler {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b := guard(w, r, timeout)
		if b != nil {
			b.budget = budget
			defer b.releaseBudget()
		}
		next.ServeHTTP(w, r)
	})
}

// guard puts r's body under a deadline timeout from now, unless it has
// one already or there is no body, and returns it (nil: no body).
func guard(w http.ResponseWriter, r *http.Request, timeout time.Duration) *body {
	if r.Body == nil || r.Body == http.NoBody {
		return nil
	}
	if b, ok := r.Body.(*body); ok {
		return b
	}
	rc := http.NewResponseController(w)
	// ErrNotSupported: not a connection (a request made in-process);
	// its body is in memory already.
	_ = rc.SetReadDeadline(time.Now().Add(timeout))
	b := &body{src: r.Body, rc: rc, w: w}
	r.Body = b
	return b
}

// body is a request body under its deadline, and what it holds of its
// budget.
type body struct {
	src      io.ReadCloser
	rc       *http.ResponseController
	w        http.ResponseWriter
	done     bool
	budget   *Budget
	reserved int64
}

// grow reserves n more bytes of the budget for this body.
func (b *body) grow(n int64) bool {
	if !b.budget.reserve(n) {
		return false
	}
	b.reserved += n
	return true
}

func (b *body) releaseBudget() {
	b.budget.release(b.reserved)
	b.reserved = 0
}

func (b *body) Read(p []byte) (int, error) {
	n, err := b.src.Read(p)
	switch {
	case err == nil:
	case errors.Is(err, io.EOF):
		if !b.done {
			b.done = true
			_ = b.rc.SetReadDeadline(time.Time{})
		}
	default:
		// the deadline stays: what is left is not read beyond it
		b.w.Header().Set("Connection", "close")
		if isTimeout(err) {
			err = fmt.Errorf("%w: %w", ErrTimeout, err)
		}
	}
	return n, err
}

func (b *body) Close() error { return b.src.Close() }

// Read reads r's body whole: at most maxBytes (beyond, the error is an
// *http.MaxBytesError), within the deadline Bound gave it, or timeout
// from now when nothing did, and within Bound's budget (ErrBusy when it
// has no room). The buffer grows with the bytes received. After an
// error the connection closes once answered (Answer).
func Read(w http.ResponseWriter, r *http.Request, maxBytes int64, timeout time.Duration) ([]byte, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	b := guard(w, r, timeout)
	src := http.MaxBytesReader(w, r.Body, maxBytes)
	// a declared length sizes the first buffer, up to 64 KiB: never
	// trusted further
	buf := make([]byte, 0, max(512, min(r.ContentLength+1, 64<<10, maxBytes+1)))
	if !b.grow(int64(cap(buf))) {
		w.Header().Set("Connection", "close")
		return nil, ErrBusy
	}
	for {
		if len(buf) == cap(buf) {
			bigger := int(min(2*int64(cap(buf)), maxBytes+1))
			if !b.grow(int64(bigger - cap(buf))) {
				w.Header().Set("Connection", "close")
				return nil, ErrBusy
			}
			buf = append(make([]byte, 0, bigger), buf...)
		}
		n, err := src.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			return buf, nil
		}
		if err != nil {
			w.Header().Set("Connection", "close")
			return nil, fmt.Errorf("read the request body: %w", err)
		}
	}
}

// Answer is the client's answer to a body Read refused: 413 for one
// larger than maxBytes, 408 for one that did not arrive in time, 400
// otherwise. It never quotes the connection's error, which names the
// gateway's own address.
func Answer(err error, maxBytes int64) *openai.Error {
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return &openai.Error{Status: http.StatusRequestEntityTooLarge, Code: "request_too_large",
			Message: fmt.Sprintf("the request body is larger than %d bytes", maxBytes)}
	case errors.Is(err, ErrTimeout):
		return &openai.Error{Status: http.StatusRequestTimeout, Code: "request_timeout", Message: ErrTimeout.Error()}
	case errors.Is(err, ErrBusy):
		return &openai.Error{Status: http.StatusServiceUnavailable, Type: openai.TypeUnavailable, Code: "server_busy", Message: ErrBusy.Error(), RetryAfter: 1}
	}
	return &openai.Error{Status: http.StatusBadRequest, Code: "invalid_body", Message: "could not read the request body"}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}
