package proxy

import (
	"math/rand/v2"
	"net/http"
)

// RequestIDHeader is the request id header, kept when the client sends a
// valid one.
const RequestIDHeader = "X-Request-Id"

// maxRequestIDLen bounds a client's request id (it goes into logs, events
// and headers).
const maxRequestIDLen = 128

// RequestIDs gives every request an id before next serves it: the client's
// x-request-id when it is valid (1 to 128 characters of letters, digits and
// -_.:/+=), a new random one otherwise. The id is on the request (for the
// handlers) and on the response, errors included.
func RequestIDs(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(RequestIDHeader)
		if !validRequestID(id) {
			id = newRequestID()
			r.Header.Set(RequestIDHeader, id)
		}
		w.Header().Set(RequestIDHeader, id)
		next.ServeHTTP(w, r)
	})
}

func validRequestID(id string) bool {
	if id == "" || len(id) > maxRequestIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		switch c := id[i]; {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '-', c == '_', c == '.', c == ':', c == '/', c == '+', c == '=':
		default:
			return false
		}
	}
	return true
}

// newRequestID returns a random 128-bit id in hex.
func newRequestID() string {
	var b [32]byte
	const hex = "0123456789abcdef"
	for i, x := range [2]uint64{rand.Uint64(), rand.Uint64()} {
		for j := range 16 {
			b[i*16+j] = hex[(x>>(60-4*j))&0xf]
		}
	}
	return string(b[:])
}
