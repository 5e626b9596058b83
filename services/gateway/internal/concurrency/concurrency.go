// Package concurrency bounds the API requests a gateway serves at once: a
// request past the bound is answered 503 server_busy at once, before its
// body is read, and holds nothing. What a fleet can serve is flow
// control's to decide (it queues); this bound is the process's own, so
// that no number of clients can make it hold more requests (their
// goroutines, buffers and upstream connections) than it was sized for.
package concurrency

import (
	"net/http"
	"sync/atomic"

	"github.com/hermod/hermod/libs/openai"
)

// Limiter admits at most max requests at once. Safe for concurrent use.
type Limiter struct {
	max      int64
	inFlight atomic.Int64
	shed     atomic.Int64
}

// New returns a limiter of max requests (0 or less: nil, no bound).
func New(max int) *Limiter {
	if max <= 0 {
		return nil
	}
	return &Limiter{max: int64(max)}
}

// InFlight is how many requests the limiter holds now.
func (l *Limiter) InFlight() int64 {
	if l == nil {
		return 0
	}
	return l.inFlight.Load()
}

// Shed is how many requests it has refused.
func (l *Limiter) Shed() int64 {
	if l == nil {
		return 0
	}
	return l.shed.Load()
}

// Wrap serves next's requests within the bound (a nil limiter: all).
func (l *Limiter) Wrap(next http.Handler) http.Handler {
	if l == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if l.inFlight.Add(1) > l.max {
			l.inFlight.Add(-1)
			l.shed.Add(1)
			(&openai.Error{Status: http.StatusServiceUnavailable, Type: openai.TypeUnavailable, Code: "server_busy",
				Message:    "the gateway serves as many requests as it may at once: try again shortly",
				RetryAfter: 1, Anthropic: openai.AnthropicPath(r.URL.Path)}).Write(w)
			return
		}
		defer l.inFlight.Add(-1)
		next.ServeHTTP(w, r)
	})
}
