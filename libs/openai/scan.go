package openai

import (
	"encoding/json"
	"fmt"
	"math"
	"unicode/utf8"
)

// maxDepth bounds the nesting of arrays and objects in a request body.
const maxDepth = 256

// scanner reads one JSON document in a single pass, checking its syntax as
// it goes. The callers read the members they need and skip the others
// without building them.
type scanner struct {
	b []byte
	i int
	// mediaItems counts the media parts hashed so far (MaxMediaItems).
	mediaItems int
	// anthropic: content parts are Anthropic's blocks (tool_result's
	// content, tool_use's input and thinking are prompt text too)
	anthropic bool
	// inBlock: reading the blocks a block nests (no deeper)
	inBlock bool
}

func (s *scanner) peek() byte {
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// syntaxError reports malformed JSON at the scanner's offset.
func (s *scanner) syntaxError(format string, args ...any) error {
	return &BodyError{Msg: fmt.Sprintf("request body is not valid JSON: "+format+" (offset %d)", append(args, s.i)...)}
}

// object scans an object, calling member for each key with the scanner at
// its value; member must consume the value. Keys are returned decoded.
func (s *scanner) object(depth int, member func(key []byte) error) error {
	if depth > maxDepth {
		return s.syntaxError("nested too deeply")
	}
	s.i++ // '{'
	s.ws()
	if s.peek() == '}' {
		s.i++
		return nil
	}
	for {
		s.ws()
		if s.peek() != '"' {
			return s.syntaxError("expected a string key")
		}
		start := s.i
		key, escaped, err := s.str()
		if err != nil {
			return err
		}
		if escaped { // rare: a key written with escapes
			var k string
			if json.Unmarshal(s.b[start:s.i], &k) == nil {
				key = []byte(k)
			}
		}
		s.ws()
		if s.peek() != ':' {
			return s.syntaxError("expected ':'")
		}
		s.i++
		s.ws()
		if err := member(key); err != nil {
			return err
		}
		s.ws()
		switch s.peek() {
		case ',':
			s.i++
		case '}':
			s.i++
			return nil
		default:
			return s.syntaxError("expected ',' or '}'")
		}
	}
}

// array scans an array, calling elem for each element with the scanner at
// it; elem must consume the element.
func (s *scanner) array(depth int, elem func(i int) error) error {
	if depth > maxDepth {
		return s.syntaxError("nested too deeply")
	}
	s.i++ // '['
	s.ws()
	if s.peek() == ']' {
		s.i++
		return nil
	}
	for n := 0; ; n++ {
		s.ws()
		if err := elem(n); err != nil {
			return err
		}
		s.ws()
		switch s.peek() {
		case ',':
			s.i++
		case ']':
			s.i++
			return nil
		default:
			return s.syntaxError("expected ',' or ']'")
		}
	}
}

// skip passes over one value.
func (s *scanner) skip(depth int) error {
	switch c := s.peek(); {
	case c == '"':
		_, _, err := s.str()
		return err
	case c == '{':
		return s.object(depth+1, func([]byte) error { return s.skip(depth + 1) })
	case c == '[':
		return s.array(depth+1, func(int) error { return s.skip(depth + 1) })
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	case c == '-' || (c >= '0' && c <= '9'):
		_, err := s.number()
		return err
	}
	return s.syntaxError("expected a value")
}

func (s *scanner) literal(lit string) error {
	if len(s.b)-s.i < len(lit) || string(s.b[s.i:s.i+len(lit)]) != lit {
		return s.syntaxError("invalid literal")
	}
	s.i += len(lit)
	return nil
}

// null consumes a null if one is next.
func (s *scanner) null() (bool, error) {
	if s.peek() != 'n' {
		return false, nil
	}
	return true, s.literal("null")
}

// number scans a number and says whether it is an integer (no fraction,
// no exponent).
func (s *scanner) number() (integer bool, err error) {
	start := s.i
	if s.peek() == '-' {
		s.i++
	}
	switch c := s.peek(); {
	case c == '0':
		s.i++
	case c >= '1' && c <= '9':
		s.digits()
	default:
		s.i = start
		return false, s.syntaxError("invalid number")
	}
	integer = true
	if s.peek() == '.' {
		s.i++
		integer = false
		if !s.digits() {
			return false, s.syntaxError("invalid number")
		}
	}
	if c := s.peek(); c == 'e' || c == 'E' {
		s.i++
		integer = false
		if c := s.peek(); c == '+' || c == '-' {
			s.i++
		}
		if !s.digits() {
			return false, s.syntaxError("invalid number")
		}
	}
	return integer, nil
}

func (s *scanner) digits() bool {
	start := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	return s.i > start
}

// str scans a string and returns its raw contents (between the quotes) and
// whether it holds escapes.
func (s *scanner) str() ([]byte, bool, error) {
	s.i++ // '"'
	start := s.i
	escaped := false
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			raw := s.b[start:s.i]
			s.i++
			return raw, escaped, nil
		case c == '\\':
			escaped = true
			if s.i+1 >= len(s.b) {
				return nil, false, s.syntaxError("unterminated string")
			}
			switch s.b[s.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i += 2
			case 'u':
				if s.i+6 > len(s.b) || !isHex4(s.b[s.i+2:s.i+6]) {
					return nil, false, s.syntaxError("invalid \\u escape")
				}
				s.i += 6
			default:
				return nil, false, s.syntaxError("invalid escape")
			}
		case c < 0x20:
			return nil, false, s.syntaxError("control character in string")
		default:
			s.i++
		}
	}
	return nil, false, s.syntaxError("unterminated string")
}

// stringValue reads a string value decoded (invalid UTF-8 becomes U+FFFD,
// as encoding/json has it). ok is false, and the value is skipped, when
// the value is not a string.
func (s *scanner) stringValue() (v string, ok bool, err error) {
	if s.peek() != '"' {
		return "", false, s.skip(1)
	}
	start := s.i
	raw, escaped, err := s.str()
	if err != nil {
		return "", false, err
	}
	if !escaped && utf8.Valid(raw) {
		return string(raw), true, nil
	}
	if err := json.Unmarshal(s.b[start:s.i], &v); err != nil {
		return "", false, s.syntaxError("invalid string")
	}
	return v, true, nil
}

// uintValue reads a non-negative integer, saturating at MaxUint64. ok is
// false, and the value is consumed, when the value is anything else (a
// fraction, a negative number, another type).
func (s *scanner) uintValue() (v uint64, ok bool, err error) {
	c := s.peek()
	if c < '0' || c > '9' {
		return 0, false, s.skip(1)
	}
	start := s.i
	integer, err := s.number()
	if err != nil || !integer {
		return 0, false, err
	}
	for _, c := range s.b[start:s.i] {
		d := uint64(c - '0')
		if v > (math.MaxUint64-d)/10 {
			return math.MaxUint64, true, nil
		}
		v = v*10 + d
	}
	return v, true, nil
}

func isHex4(b []byte) bool {
	for _, c := range b {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') && (c < 'A' || c > 'F') {
			return false
		}
	}
	return true
}
