// Package requestid validates the request ids clients send (x-request-id)
// and makes new ones, alike at every front door (the gateway, the picker's
// Envoy ext_proc server).
package requestid

import "math/rand/v2"

// MaxLen bounds a client's request id (it goes into logs, events and
// headers).
const MaxLen = 128

// Valid reports whether a client's id can be kept: 1 to MaxLen characters
// of letters, digits and -_.:/+=.
func Valid(id string) bool {
	if id == "" || len(id) > MaxLen {
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

// New returns a random 128-bit id in lower-case hex.
func New() string {
	var b [32]byte
	const hex = "0123456789abcdef"
	for i, x := range [2]uint64{rand.Uint64(), rand.Uint64()} {
		for j := range 16 {
			b[i*16+j] = hex[(x>>(60-4*j))&0xf]
		}
	}
	return string(b[:])
}
