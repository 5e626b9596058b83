package openai

import (
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"
)

// Request is what the gateway reads from an OpenAI request body: enough to
// route, stream and account for it. The picker parses the rest.
type Request struct {
	// Model is the "model" field ("" when absent or null).
	Model string
	// Stream is the "stream" field.
	Stream bool
	// HasStreamOptions says whether "stream_options" is present (null
	// included); IncludeUsage is its "include_usage".
	HasStreamOptions bool
	IncludeUsage     bool
}

// BodyError is a request body the gateway refuses; Param names the field
// at fault ("" for the body as a whole).
type BodyError struct {
	Param string
	Msg   string
}

func (e *BodyError) Error() string {
	if e.Param == "" {
		return e.Msg
	}
	return e.Param + ": " + e.Msg
}

// maxDepth bounds the nesting of arrays and objects.
const maxDepth = 256

// Inspect checks that body is one valid JSON object and reads the fields of
// Request from its top level in one pass, without building the document.
func Inspect(body []byte) (Request, error) {
	var r Request
	s := scanner{b: body}
	s.ws()
	if s.peek() != '{' {
		return r, &BodyError{Msg: "request body must be a JSON object"}
	}
	err := s.object(0, func(key []byte, escaped bool) error {
		if escaped {
			var k string
			if json.Unmarshal(append(append([]byte{'"'}, key...), '"'), &k) == nil {
				key = []byte(k)
			}
		}
		switch string(key) {
		case "model":
			return s.modelValue(&r)
		case "stream":
			v, null, err := s.boolValue("stream")
			if err == nil && !null {
				r.Stream = v
			}
			return err
		case "stream_options":
			return s.streamOptions(&r)
		}
		return s.value(1)
	})
	if err != nil {
		return Request{}, err
	}
	s.ws()
	if s.i != len(s.b) {
		return Request{}, s.errorf("unexpected data after the JSON object")
	}
	return r, nil
}

type scanner struct {
	b []byte
	i int
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

func (s *scanner) errorf(format string, args ...any) error {
	return &BodyError{Msg: fmt.Sprintf("request body is not valid JSON: "+format+" (offset %d)", append(args, s.i)...)}
}

// object scans an object, calling member for each key with the scanner at
// its value; member must consume the value.
func (s *scanner) object(depth int, member func(key []byte, escaped bool) error) error {
	if depth > maxDepth {
		return s.errorf("nested too deeply")
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
			return s.errorf("expected a string key")
		}
		key, escaped, err := s.str()
		if err != nil {
			return err
		}
		s.ws()
		if s.peek() != ':' {
			return s.errorf("expected ':'")
		}
		s.i++
		s.ws()
		if err := member(key, escaped); err != nil {
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
			return s.errorf("expected ',' or '}'")
		}
	}
}

// value skips one JSON value.
func (s *scanner) value(depth int) error {
	switch c := s.peek(); {
	case c == '"':
		_, _, err := s.str()
		return err
	case c == '{':
		return s.object(depth+1, func([]byte, bool) error { return s.value(depth + 1) })
	case c == '[':
		return s.array(depth + 1)
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	case c == '-' || (c >= '0' && c <= '9'):
		return s.number()
	}
	return s.errorf("expected a value")
}

func (s *scanner) array(depth int) error {
	if depth > maxDepth {
		return s.errorf("nested too deeply")
	}
	s.i++ // '['
	s.ws()
	if s.peek() == ']' {
		s.i++
		return nil
	}
	for {
		s.ws()
		if err := s.value(depth); err != nil {
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
			return s.errorf("expected ',' or ']'")
		}
	}
}

func (s *scanner) literal(lit string) error {
	if len(s.b)-s.i < len(lit) || string(s.b[s.i:s.i+len(lit)]) != lit {
		return s.errorf("invalid literal")
	}
	s.i += len(lit)
	return nil
}

func (s *scanner) number() error {
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
		return s.errorf("invalid number")
	}
	if s.peek() == '.' {
		s.i++
		if !s.digits() {
			return s.errorf("invalid number")
		}
	}
	if c := s.peek(); c == 'e' || c == 'E' {
		s.i++
		if c := s.peek(); c == '+' || c == '-' {
			s.i++
		}
		if !s.digits() {
			return s.errorf("invalid number")
		}
	}
	return nil
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
				return nil, false, s.errorf("unterminated string")
			}
			switch s.b[s.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i += 2
			case 'u':
				if s.i+6 > len(s.b) || !isHex4(s.b[s.i+2:s.i+6]) {
					return nil, false, s.errorf("invalid \\u escape")
				}
				s.i += 6
			default:
				return nil, false, s.errorf("invalid escape")
			}
		case c < 0x20:
			return nil, false, s.errorf("control character in string")
		default:
			s.i++
		}
	}
	return nil, false, s.errorf("unterminated string")
}

func isHex4(b []byte) bool {
	for _, c := range b {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') && (c < 'A' || c > 'F') {
			return false
		}
	}
	return true
}

func (s *scanner) modelValue(r *Request) error {
	switch s.peek() {
	case 'n':
		r.Model = ""
		return s.literal("null")
	case '"':
		start := s.i
		raw, escaped, err := s.str()
		if err != nil {
			return err
		}
		if !escaped && utf8.Valid(raw) {
			r.Model = string(raw)
			return nil
		}
		if err := json.Unmarshal(s.b[start:s.i], &r.Model); err != nil {
			return &BodyError{Param: "model", Msg: "must be a string"}
		}
		return nil
	}
	if err := s.value(1); err != nil {
		return err
	}
	return &BodyError{Param: "model", Msg: "must be a string"}
}

func (s *scanner) boolValue(param string) (v, null bool, err error) {
	switch s.peek() {
	case 't':
		return true, false, s.literal("true")
	case 'f':
		return false, false, s.literal("false")
	case 'n':
		return false, true, s.literal("null")
	}
	if err := s.value(1); err != nil {
		return false, false, err
	}
	return false, false, &BodyError{Param: param, Msg: "must be a boolean"}
}

func (s *scanner) streamOptions(r *Request) error {
	switch s.peek() {
	case 'n':
		r.HasStreamOptions, r.IncludeUsage = true, false
		return s.literal("null")
	case '{':
		r.HasStreamOptions, r.IncludeUsage = true, false
		return s.object(1, func(key []byte, _ bool) error {
			if string(key) != "include_usage" {
				return s.value(2)
			}
			v, _, err := s.boolValue("stream_options.include_usage")
			r.IncludeUsage = v
			return err
		})
	}
	if err := s.value(1); err != nil {
		return err
	}
	return &BodyError{Param: "stream_options", Msg: "must be an object"}
}

// ErrNotObject is returned by WithIncludeUsage for a body that is not a
// JSON object.
var ErrNotObject = errors.New("request body is not a JSON object")

// WithIncludeUsage returns body with stream_options.include_usage set to
// true, so that a streamed response ends with a usage chunk the gateway can
// account. r is Inspect's result for body.
func WithIncludeUsage(body []byte, r Request) ([]byte, error) {
	if r.IncludeUsage {
		return body, nil
	}
	if !r.HasStreamOptions {
		// Insert the member right after the opening brace.
		s := scanner{b: body}
		s.ws()
		if s.peek() != '{' {
			return nil, ErrNotObject
		}
		open := s.i + 1
		s.i = open
		s.ws()
		member := `"stream_options":{"include_usage":true}`
		if s.peek() != '}' {
			member += ","
		}
		out := make([]byte, 0, len(body)+len(member))
		out = append(out, body[:open]...)
		out = append(out, member...)
		return append(out, body[open:]...), nil
	}
	// Rare: stream_options is there (maybe null) without include_usage:
	// true. Rewrite it member by member, keeping the other members as they
	// are.
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return nil, ErrNotObject
	}
	var opts map[string]json.RawMessage
	if err := json.Unmarshal(top["stream_options"], &opts); err != nil || opts == nil {
		opts = map[string]json.RawMessage{}
	}
	opts["include_usage"] = json.RawMessage("true")
	b, err := json.Marshal(opts)
	if err != nil {
		return nil, err
	}
	top["stream_options"] = b
	return json.Marshal(top)
}
