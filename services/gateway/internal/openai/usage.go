package openai

import (
	"bytes"
	"encoding/json"
)

// Usage is the token accounting of a response ("usage").
type Usage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	TotalTokens      int64 `json:"total_tokens"`
	Details          *struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details,omitempty"`
}

// CachedTokens returns prompt_tokens_details.cached_tokens (0 if absent).
func (u Usage) CachedTokens() int64 {
	if u.Details == nil {
		return 0
	}
	return u.Details.CachedTokens
}

// ResponseUsage reads the usage of a non-streamed response from its body,
// or from its tail: it decodes the object of the last "usage" member (the
// top-level one, which servers put last) without decoding the rest. The
// bytes "usage": cannot occur inside a JSON string (its quotes would be
// escaped), so the last occurrence is a member.
func ResponseUsage(body []byte) (Usage, bool) {
	for end := len(body); ; {
		i := bytes.LastIndex(body[:end], usageKey)
		if i < 0 {
			return Usage{}, false
		}
		end = i
		rest := body[i+len(usageKey):]
		j := 0
		for j < len(rest) && (rest[j] == ' ' || rest[j] == '\t' || rest[j] == '\n' || rest[j] == '\r') {
			j++
		}
		if j == len(rest) || rest[j] != ':' {
			continue
		}
		var u *Usage
		if err := json.NewDecoder(bytes.NewReader(rest[j+1:])).Decode(&u); err != nil || u == nil {
			continue // a nested "usage" of another shape: look further back
		}
		return *u, true
	}
}

// ChunkUsage reads the usage of one streamed chunk (the JSON after
// "data: "). usageOnly says the chunk carries nothing else: no choices, as
// the final chunk of a stream with include_usage is.
func ChunkUsage(data []byte) (u Usage, usageOnly, ok bool) {
	if !hasUsageObject(data) {
		return Usage{}, false, false
	}
	var c struct {
		Choices []json.RawMessage `json:"choices"`
		Usage   *Usage            `json:"usage"`
	}
	if json.Unmarshal(data, &c) != nil || c.Usage == nil {
		return Usage{}, false, false
	}
	return *c.Usage, len(c.Choices) == 0, true
}

var usageKey = []byte(`"usage"`)

// hasUsageObject is a quick test for a "usage" member holding an object,
// so that chunks without one are not decoded.
func hasUsageObject(b []byte) bool {
	for {
		i := bytes.Index(b, usageKey)
		if i < 0 {
			return false
		}
		b = b[i+len(usageKey):]
		j := 0
		for j < len(b) && (b[j] == ' ' || b[j] == '\t' || b[j] == '\n' || b[j] == '\r' || b[j] == ':') {
			j++
		}
		if j < len(b) && b[j] == '{' {
			return true
		}
	}
}
