package scheduling

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ParseRequest decodes the routing-relevant fields of an OpenAI completions
// or chat-completions request body into a Request (model, body and, for a
// completions prompt given as token ids, TokenIDs). The caller adds the id
// and headers. A body that is not valid JSON or has fields of the wrong type
// is a KindBadRequest error naming the field.
func ParseRequest(api API, body []byte) (*Request, error) {
	model, b, ids, err := parseBody(api, body)
	if err != nil {
		return nil, err
	}
	return &Request{Model: model, Body: b, TokenIDs: ids}, nil
}

func parseBody(api API, body []byte) (model string, b Body, ids []uint32, err error) {
	var w struct {
		Model               json.RawMessage   `json:"model"`
		Prompt              json.RawMessage   `json:"prompt"`
		Messages            []json.RawMessage `json:"messages"`
		MaxTokens           json.RawMessage   `json:"max_tokens"`
		MaxCompletionTokens json.RawMessage   `json:"max_completion_tokens"`
		Stream              json.RawMessage   `json:"stream"`
	}
	if err := json.Unmarshal(body, &w); err != nil {
		return "", Body{}, nil, BadRequestf("request body is not a JSON object: %s", jsonErrorText(err))
	}
	for _, f := range []struct {
		name string
		raw  json.RawMessage
	}{{"max_completion_tokens", w.MaxCompletionTokens}, {"max_tokens", w.MaxTokens}} {
		if len(f.raw) == 0 || isNull(f.raw) || b.MaxTokens > 0 {
			continue
		}
		var n int64
		if err := json.Unmarshal(f.raw, &n); err != nil || n < 0 {
			return "", Body{}, nil, BadRequestf("%s: must be a non-negative integer", f.name)
		}
		b.MaxTokens = int(min(n, math.MaxInt32))
	}
	if len(w.Stream) > 0 && !isNull(w.Stream) {
		if err := json.Unmarshal(w.Stream, &b.Stream); err != nil {
			return "", Body{}, nil, BadRequestf("stream: must be a boolean")
		}
	}
	if len(w.Model) > 0 && !isNull(w.Model) {
		if err := json.Unmarshal(w.Model, &model); err != nil {
			return "", Body{}, nil, BadRequestf("model: must be a string")
		}
	}
	b.API = api
	switch api {
	case APICompletions:
		if len(w.Prompt) == 0 || isNull(w.Prompt) {
			return "", Body{}, nil, BadRequestf("prompt: required")
		}
		p, tokens, err := parsePrompt(w.Prompt)
		if err != nil {
			return "", Body{}, nil, err
		}
		b.Prompt, ids = p, tokens
	case APIChatCompletions:
		if w.Messages == nil {
			return "", Body{}, nil, BadRequestf("messages: required")
		}
		b.Messages = make([]Message, len(w.Messages))
		for i, raw := range w.Messages {
			if err := parseMessage(raw, &b.Messages[i]); err != nil {
				return "", Body{}, nil, BadRequestf("messages[%d].%s", i, err.Error())
			}
		}
	default:
		return "", Body{}, nil, BadRequestf("unsupported API %d", api)
	}
	return model, b, ids, nil
}

// parsePrompt accepts a string, a list of strings (joined by "\n"), one
// token-id list (returned as ids, and as their decimal text so the prompt
// still hashes and counts), or several token-id lists.
func parsePrompt(raw json.RawMessage) (string, []uint32, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", nil, BadRequestf("prompt: must be a string or a list")
		}
		return s, nil, nil
	}
	if len(raw) == 0 || raw[0] != '[' {
		return "", nil, BadRequestf("prompt: must be a string or a list")
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return "", nil, BadRequestf("prompt: must be a string or a list")
	}
	if len(items) > 0 && isNumber(items[0]) {
		ids, err := parseTokenIDs(raw)
		if err != nil {
			return "", nil, BadRequestf("prompt: %s", err)
		}
		return tokenText(ids), ids, nil
	}
	var sb strings.Builder
	for i, it := range items {
		if i > 0 {
			sb.WriteByte('\n')
		}
		it = bytes.TrimSpace(it)
		switch {
		case len(it) > 0 && it[0] == '"':
			var s string
			if err := json.Unmarshal(it, &s); err != nil {
				return "", nil, BadRequestf("prompt[%d]: must be a string", i)
			}
			sb.WriteString(s)
		case len(it) > 0 && it[0] == '[':
			ids, err := parseTokenIDs(it)
			if err != nil {
				return "", nil, BadRequestf("prompt[%d]: %s", i, err)
			}
			sb.WriteString(tokenText(ids))
		default:
			return "", nil, BadRequestf("prompt[%d]: must be a string or a list of token ids", i)
		}
	}
	return sb.String(), nil, nil
}

func isNumber(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && (raw[0] == '-' || (raw[0] >= '0' && raw[0] <= '9'))
}

func parseTokenIDs(raw json.RawMessage) ([]uint32, error) {
	var ids []uint32
	if err := json.Unmarshal(raw, &ids); err != nil {
		return nil, fmt.Errorf("must be a list of token ids (integers 0..%d)", uint32(math.MaxUint32))
	}
	return ids, nil
}

func tokenText(ids []uint32) string {
	b := make([]byte, 0, len(ids)*6)
	for i, id := range ids {
		if i > 0 {
			b = append(b, ' ')
		}
		b = strconv.AppendUint(b, uint64(id), 10)
	}
	return string(b)
}

func parseMessage(raw json.RawMessage, m *Message) error {
	var w struct {
		Role    json.RawMessage `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(raw, &w); err != nil {
		return fmt.Errorf("must be an object")
	}
	if len(w.Role) > 0 && !isNull(w.Role) {
		if err := json.Unmarshal(w.Role, &m.Role); err != nil {
			return fmt.Errorf("role: must be a string")
		}
	}
	content := bytes.TrimSpace(w.Content)
	switch {
	case len(content) == 0 || isNull(content):
	case content[0] == '"':
		if err := json.Unmarshal(content, &m.Content); err != nil {
			return fmt.Errorf("content: must be a string or a list of content parts")
		}
	case content[0] == '[':
		var parts []struct {
			Type string          `json:"type"`
			Text json.RawMessage `json:"text"`
		}
		if err := json.Unmarshal(content, &parts); err != nil {
			return fmt.Errorf("content: must be a list of content parts")
		}
		var sb strings.Builder
		for j, p := range parts {
			switch kind := mediaKindOf(p.Type); {
			case kind != 0:
				m.Media |= kind
			case len(p.Text) > 0 && !isNull(p.Text):
				var t string
				if err := json.Unmarshal(p.Text, &t); err != nil {
					return fmt.Errorf("content[%d].text: must be a string", j)
				}
				sb.WriteString(t)
			}
		}
		m.Content = sb.String()
	default:
		return fmt.Errorf("content: must be a string or a list of content parts")
	}
	return nil
}

// mediaKindOf maps an OpenAI / vLLM content-part type to its media kind.
func mediaKindOf(partType string) MediaKind {
	switch partType {
	case "image_url", "input_image", "image", "image_embeds", "image_pil":
		return MediaImage
	case "input_audio", "audio_url", "audio":
		return MediaAudio
	case "video_url", "video":
		return MediaVideo
	}
	return 0
}

func isNull(raw json.RawMessage) bool {
	return bytes.Equal(bytes.TrimSpace(raw), []byte("null"))
}

// jsonErrorText shortens encoding/json errors for client-facing messages.
func jsonErrorText(err error) string {
	return strings.TrimPrefix(err.Error(), "json: ")
}
