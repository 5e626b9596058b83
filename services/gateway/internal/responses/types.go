package responses

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Request is the body of POST /v1/responses (the fields Hermod serves;
// others are ignored).
type Request struct {
	Model              string            `json:"model"`
	Input              json.RawMessage   `json:"input"`
	Instructions       string            `json:"instructions,omitempty"`
	PreviousResponseID string            `json:"previous_response_id,omitempty"`
	Store              *bool             `json:"store,omitempty"`
	Stream             bool              `json:"stream,omitempty"`
	Background         bool              `json:"background,omitempty"`
	MaxOutputTokens    *int              `json:"max_output_tokens,omitempty"`
	Temperature        *float64          `json:"temperature,omitempty"`
	TopP               *float64          `json:"top_p,omitempty"`
	User               string            `json:"user,omitempty"`
	Metadata           map[string]string `json:"metadata,omitempty"`
	Conversation       json.RawMessage   `json:"conversation,omitempty"`
	// conversation is Conversation's id (conversationOf).
	conversation string
}

// InputItem is a message item of a response's input, as stored and as
// listed by /input_items.
type InputItem struct {
	ID      string         `json:"id"`
	Type    string         `json:"type"`
	Role    string         `json:"role"`
	Status  string         `json:"status,omitempty"`
	Content []ContentBlock `json:"content"`
}

// ContentBlock is a piece of an input message: input_text (output_text
// for an assistant message given as input).
type ContentBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// OutputText is a piece of an output message.
type OutputText struct {
	Type        string `json:"type"`
	Text        string `json:"text"`
	Annotations []any  `json:"annotations"`
}

// Response is the Response object.
type Response struct {
	ID                 string            `json:"id"`
	Object             string            `json:"object"`
	CreatedAt          int64             `json:"created_at"`
	Status             string            `json:"status"`
	Error              *ResponseError    `json:"error"`
	IncompleteDetails  *Incomplete       `json:"incomplete_details"`
	Instructions       *string           `json:"instructions"`
	MaxOutputTokens    *int              `json:"max_output_tokens"`
	Model              string            `json:"model"`
	Output             []OutputItem      `json:"output"`
	ParallelToolCalls  bool              `json:"parallel_tool_calls"`
	PreviousResponseID *string           `json:"previous_response_id"`
	Store              bool              `json:"store"`
	Temperature        *float64          `json:"temperature"`
	Text               map[string]any    `json:"text"`
	ToolChoice         string            `json:"tool_choice"`
	Tools              []any             `json:"tools"`
	TopP               *float64          `json:"top_p"`
	Truncation         string            `json:"truncation"`
	Usage              *Usage            `json:"usage"`
	User               *string           `json:"user"`
	Metadata           map[string]string `json:"metadata"`
	Background         bool              `json:"background"`
	Conversation       *ConversationRef  `json:"conversation,omitempty"`
}

// ResponseError is a failed response's error.
type ResponseError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Incomplete says why a response stopped early.
type Incomplete struct {
	Reason string `json:"reason"`
}

// OutputItem is an assistant message of a response's output.
type OutputItem struct {
	Type    string       `json:"type"`
	ID      string       `json:"id"`
	Status  string       `json:"status"`
	Role    string       `json:"role"`
	Content []OutputText `json:"content"`
}

// Usage is a response's token usage.
type Usage struct {
	InputTokens         int                 `json:"input_tokens"`
	InputTokensDetails  InputTokensDetails  `json:"input_tokens_details"`
	OutputTokens        int                 `json:"output_tokens"`
	OutputTokensDetails OutputTokensDetails `json:"output_tokens_details"`
	TotalTokens         int                 `json:"total_tokens"`
}

// InputTokensDetails break input usage down.
type InputTokensDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

// OutputTokensDetails break output usage down.
type OutputTokensDetails struct {
	ReasoningTokens int `json:"reasoning_tokens"`
}

// record is what the store keeps for a response: its input items and the
// Response object.
type record struct {
	Input    []InputItem `json:"input"`
	Response *Response   `json:"response"`
	// Owner is the principal that created the response (auth.Principal):
	// only it reads, continues, cancels or deletes it.
	Owner string `json:"owner,omitempty"`
}

func newID(prefix string) string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// errBadInput is an invalid input field.
var errBadInput = errors.New("invalid input")

// parseInput turns the input field (a string, or a list of messages whose
// content is a string or a list of input_text parts) into message items.
func parseInput(raw json.RawMessage) ([]InputItem, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, fmt.Errorf("%w: input is required", errBadInput)
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, fmt.Errorf("%w: %w", errBadInput, err)
		}
		return []InputItem{userText(s)}, nil
	}
	var items []struct {
		Type    string          `json:"type"`
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, fmt.Errorf("%w: input must be a string or a list of messages", errBadInput)
	}
	if len(items) == 0 {
		return nil, fmt.Errorf("%w: input is empty", errBadInput)
	}
	out := make([]InputItem, 0, len(items))
	for i, it := range items {
		if it.Type != "" && it.Type != "message" {
			return nil, fmt.Errorf("%w: input[%d].type %q is not supported (only messages)", errBadInput, i, it.Type)
		}
		switch it.Role {
		case "user", "system", "developer", "assistant":
		default:
			return nil, fmt.Errorf("%w: input[%d].role must be user, system, developer or assistant (got %q)", errBadInput, i, it.Role)
		}
		text, err := contentText(it.Content)
		if err != nil {
			return nil, fmt.Errorf("%w: input[%d].content: %w", errBadInput, i, err)
		}
		typ := "input_text"
		if it.Role == "assistant" {
			typ = "output_text"
		}
		out = append(out, InputItem{ID: newID("msg_"), Type: "message", Role: it.Role, Status: "completed", Content: []ContentBlock{{Type: typ, Text: text}}})
	}
	return out, nil
}

func userText(s string) InputItem {
	return InputItem{ID: newID("msg_"), Type: "message", Role: "user", Status: "completed", Content: []ContentBlock{{Type: "input_text", Text: s}}}
}

func contentText(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", errors.New("a string or a list of text parts")
	}
	var b strings.Builder
	for i, p := range parts {
		switch p.Type {
		case "input_text", "output_text", "text":
			b.WriteString(p.Text)
		default:
			return "", fmt.Errorf("part %d: type %q is not supported (text only)", i, p.Type)
		}
	}
	return b.String(), nil
}

// chatMessage is a message of the chat completion the gateway sends.
type chatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// messages builds the conversation: the request's instructions as the
// system message, then every earlier turn's input and output, then this
// turn's input.
func messages(instructions string, chain []record, input []InputItem) []chatMessage {
	var msgs []chatMessage
	if instructions != "" {
		msgs = append(msgs, chatMessage{Role: "system", Content: instructions})
	}
	add := func(items []InputItem) {
		for _, it := range items {
			role := it.Role
			if role == "developer" {
				role = "system"
			}
			msgs = append(msgs, chatMessage{Role: role, Content: itemText(it.Content)})
		}
	}
	for _, r := range chain {
		add(r.Input)
		if r.Response != nil {
			for _, o := range r.Response.Output {
				var b strings.Builder
				for _, p := range o.Content {
					b.WriteString(p.Text)
				}
				msgs = append(msgs, chatMessage{Role: "assistant", Content: b.String()})
			}
		}
	}
	add(input)
	return msgs
}

func itemText(c []ContentBlock) string {
	if len(c) == 1 {
		return c[0].Text
	}
	var b strings.Builder
	for _, p := range c {
		b.WriteString(p.Text)
	}
	return b.String()
}
