package bus

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInvalidToken is returned for a subject token or KV key element that is
// not the canonical escaping of a name.
var ErrInvalidToken = errors.New("invalid token")

const upperHex = "0123456789ABCDEF"

// mustEscapeInSubject says whether b cannot appear as itself in a subject
// token: the token separator '.', the wildcards '*' and '>', ASCII
// whitespace and control bytes (the protocol splits on whitespace), DEL,
// and the escape byte '%' itself.
func mustEscapeInSubject(b byte) bool {
	return b <= ' ' || b == 0x7f || b == '.' || b == '*' || b == '>' || b == '%'
}

// EscapeToken escapes s for use as one token of a NATS subject: every byte
// that may not appear in a token ('.', '*', '>', ASCII whitespace and
// control bytes, DEL) and the escape byte '%' become "%XX" with two
// upper-case hex digits; all other bytes, UTF-8 included, stay as they are.
// For example "10.0.0.5:8000" becomes "10%2E0%2E0%2E5:8000".
//
// The escaping is reversible (UnescapeToken) and canonical: distinct names
// give distinct tokens. The empty string escapes to the empty string, which
// is not a valid token; the subject builders reject it.
func EscapeToken(s string) string {
	n := 0
	for i := 0; i < len(s); i++ {
		if mustEscapeInSubject(s[i]) {
			n++
		}
	}
	if n == 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 2*n)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if mustEscapeInSubject(c) {
			b.WriteByte('%')
			b.WriteByte(upperHex[c>>4])
			b.WriteByte(upperHex[c&0x0f])
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// UnescapeToken reverses EscapeToken. It accepts only canonical tokens, the
// output of EscapeToken for a non-empty name: it fails with ErrInvalidToken
// for the empty token, a byte that must be escaped, a malformed escape, or
// an escape of a byte that needs none (lower-case hex included), so that
// every name has exactly one token.
func UnescapeToken(tok string) (string, error) {
	return unescape(tok, '%', mustEscapeInSubject)
}

// unescape decodes tok, in which the bytes for which mustEscape holds
// (including esc itself) are written as esc followed by two upper-case hex
// digits.
func unescape(tok string, esc byte, mustEscape func(byte) bool) (string, error) {
	if tok == "" {
		return "", fmt.Errorf("empty token: %w", ErrInvalidToken)
	}
	if strings.IndexByte(tok, esc) < 0 {
		for i := 0; i < len(tok); i++ {
			if mustEscape(tok[i]) {
				return "", fmt.Errorf("token %q: byte %q at %d must be escaped: %w", tok, tok[i], i, ErrInvalidToken)
			}
		}
		return tok, nil
	}
	var b strings.Builder
	b.Grow(len(tok))
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		if c != esc {
			if mustEscape(c) {
				return "", fmt.Errorf("token %q: byte %q at %d must be escaped: %w", tok, c, i, ErrInvalidToken)
			}
			b.WriteByte(c)
			continue
		}
		if i+2 >= len(tok) {
			return "", fmt.Errorf("token %q: truncated escape at %d: %w", tok, i, ErrInvalidToken)
		}
		hi, lo := unhex(tok[i+1]), unhex(tok[i+2])
		if hi < 0 || lo < 0 {
			return "", fmt.Errorf("token %q: bad escape %q at %d: %w", tok, tok[i:i+3], i, ErrInvalidToken)
		}
		d := byte(hi<<4 | lo)
		if !mustEscape(d) {
			return "", fmt.Errorf("token %q: needless escape %q at %d: %w", tok, tok[i:i+3], i, ErrInvalidToken)
		}
		b.WriteByte(d)
		i += 2
	}
	return b.String(), nil
}

// unhex returns the value of an upper-case hex digit, or -1.
func unhex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}
