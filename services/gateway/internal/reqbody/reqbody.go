// Package reqbody reads request bodies the one way every gateway handler
// does: bounded in size, into a buffer that grows with the bytes received
// (never with the length a client declared), and under one read deadline
// per body that holds until the connection is released, net/http's
// reading of what a handler left unread included.
package reqbody

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/hermod/hermod/libs/openai"
)

// DefaultTimeout bounds the arrival of a body when nothing in front set
// one (Bound).
const DefaultTimeout = time.Minute

// ErrTimeout is the error of a body that did not arrive within its
// deadline.
var ErrTimeout = errors.New("the request body did not arrive in time")

// Bound gives every request with a body one read deadline: timeout from
// the request's arrival, for the handler's reads and for net/http's
// reading of what the handler left unread. A body read to its end lifts
// the deadline (a long streamed answer follows; net/http then watches the
// connection for the client leaving, which a passed deadline would take
// for a failure); a body that fails keeps it, and the connection closes
// after the answer. Handlers read bodies with Read.
func Bound(next http.Handler, timeout time.Duration) http.Handler {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		guard(w, r, timeout)
		next.ServeHTTP(w, r)
	})
}

// guard puts r's body under a deadline timeout from now, unless it has
// one already or there is no body.
func guard(w http.ResponseWriter, r *http.Request, timeout time.Duration) {
	if r.Body == nil || r.Body == http.NoBody {
		return
	}
	if _, ok := r.Body.(*body); ok {
		return
	}
	rc := http.NewResponseController(w)
	// ErrNotSupported: not a connection (a request made in-process);
	// its body is in memory already.
	_ = rc.SetReadDeadline(time.Now().Add(timeout))
	r.Body = &body{src: r.Body, rc: rc, w: w}
}

// body is a request body under its deadline.
type body struct {
	src  io.ReadCloser
	rc   *http.ResponseController
	w    http.ResponseWriter
	done bool
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
// from now when nothing did. The buffer grows with the bytes received.
// After an error the connection closes once answered (Answer).
func Read(w http.ResponseWriter, r *http.Request, maxBytes int64, timeout time.Duration) ([]byte, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	guard(w, r, timeout)
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, maxBytes)); err != nil {
		w.Header().Set("Connection", "close")
		return nil, fmt.Errorf("read the request body: %w", err)
	}
	return buf.Bytes(), nil
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
	}
	return &openai.Error{Status: http.StatusBadRequest, Code: "invalid_body", Message: "could not read the request body"}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}
