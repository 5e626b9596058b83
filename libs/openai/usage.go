package openai

import (
	"bytes"
	"encoding/json"
)

// Usage is the token accounting a response reports ("usage").
type Usage struct {
	PromptTokens, CachedTokens, CompletionTokens int64
}

// usageJSON is the usage object: OpenAI's members, or Anthropic's
// (input_tokens, output_tokens, cache_read_input_tokens).
type usageJSON struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	Details          *struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	InputTokens     *int64 `json:"input_tokens"`
	OutputTokens    *int64 `json:"output_tokens"`
	CacheReadTokens int64  `json:"cache_read_input_tokens"`
}

func (u *usageJSON) usage() Usage {
	out := Usage{PromptTokens: max(u.PromptTokens, 0), CompletionTokens: max(u.CompletionTokens, 0)}
	if u.Details != nil {
		out.CachedTokens = max(u.Details.CachedTokens, 0)
	}
	return u.foldAnthropic(out)
}

// foldAnthropic sets in out the counts Anthropic's members give (an
// Anthropic stream gives them over several events, each folded in turn).
func (u *usageJSON) foldAnthropic(out Usage) Usage {
	if u.InputTokens != nil {
		out.PromptTokens = max(*u.InputTokens, 0)
	}
	if u.OutputTokens != nil {
		out.CompletionTokens = max(*u.OutputTokens, 0)
	}
	if u.CacheReadTokens > 0 {
		out.CachedTokens = u.CacheReadTokens
	}
	return out
}

var usageKey = []byte(`"usage"`)

// ResponseUsage reads the usage of a non-streamed JSON response from its
// body or its tail: it decodes the object of the last "usage" member (the
// top-level one, which servers put last) and nothing else. The bytes
// "usage" followed by a colon cannot occur inside a JSON string (its
// quotes would be escaped), so every match is a member name.
func ResponseUsage(body []byte) (Usage, bool) {
	for end := len(body); ; {
		i := bytes.LastIndex(body[:end], usageKey)
		if i < 0 {
			return Usage{}, false
		}
		end = i
		obj, ok := objectAfterKey(body[i+len(usageKey):])
		if !ok {
			continue
		}
		var u *usageJSON
		if err := json.NewDecoder(bytes.NewReader(obj)).Decode(&u); err != nil || u == nil {
			continue // a nested "usage" of another shape: look further back
		}
		return u.usage(), true
	}
}

// ChunkUsage reads the usage of one streamed chunk (an event's data).
// usageOnly says the chunk carries nothing else: no choices, as the final
// chunk of a stream with include_usage is.
func ChunkUsage(data []byte) (u Usage, usageOnly, ok bool) {
	if !hasUsageObject(data) {
		return Usage{}, false, false
	}
	var c struct {
		Choices []json.RawMessage `json:"choices"`
		Usage   *usageJSON        `json:"usage"`
	}
	if json.Unmarshal(data, &c) != nil || c.Usage == nil {
		return Usage{}, false, false
	}
	return c.Usage.usage(), len(c.Choices) == 0, true
}

// objectAfterKey returns b from the '{' that follows a member name's colon,
// if an object follows.
func objectAfterKey(b []byte) ([]byte, bool) {
	b = skipSpace(b)
	if len(b) == 0 || b[0] != ':' {
		return nil, false
	}
	b = skipSpace(b[1:])
	if len(b) == 0 || b[0] != '{' {
		return nil, false
	}
	return b, true
}

// hasUsageObject is a quick test for a "usage" member holding an object,
// so that chunks without one are not decoded.
func hasUsageObject(b []byte) bool {
	for {
		i := bytes.Index(b, usageKey)
		if i < 0 {
			return false
		}
		b = b[i+len(usageKey):]
		if _, ok := objectAfterKey(b); ok {
			return true
		}
	}
}

func skipSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\n' || b[0] == '\r') {
		b = b[1:]
	}
	return b
}
