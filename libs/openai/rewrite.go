package openai

import (
	"encoding/json"
	"errors"
)

// ErrNotObject is returned by WithIncludeUsage for a body that is not a
// JSON object.
var ErrNotObject = errors.New("request body is not a JSON object")

// WithIncludeUsage returns body with stream_options.include_usage set to
// true, so that a streamed response ends with a usage chunk to account.
// r is Parse's result for body.
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
