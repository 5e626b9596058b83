package scheduling

import (
	"unicode/utf8"

	"github.com/hermod/hermod/libs/jsonenc"
	"github.com/hermod/hermod/libs/openai"
)

// Request is what the scheduler knows about one inference request.
type Request struct {
	// ID is the request id (x-request-id); events and logs carry it.
	ID string
	// Model is the requested model name (a base model or a LoRA adapter).
	Model string
	// Adapter is the LoRA adapter the request targets, empty for the base
	// model. The caller resolves it from the pool's served models.
	Adapter string
	// Headers are the request headers with lower-case names. Plugins read
	// them (x-session-token, SLO headers); header changes go in the Result.
	Headers map[string]string
	// Body is the OpenAI request body as the client sent it, parsed.
	Body openai.Request
	// TokenIDs is the tokenized prompt when a prepare-data plugin (or the
	// client, for completions with token prompts) supplied one.
	TokenIDs []uint32

	prefixText  []byte
	promptChars int // PromptChars + 1, once computed
}

// NewRequest returns the Request of a parsed body; the model and a
// token-id prompt are the body's.
func NewRequest(id string, body openai.Request, headers map[string]string) *Request {
	return &Request{ID: id, Model: body.Model, Headers: headers, Body: body, TokenIDs: body.TokenIDs}
}

// Header returns a request header by lower-case name.
func (r *Request) Header(name string) string {
	return r.Headers[name]
}

// Media returns the union of the media kinds of every message.
func (r *Request) Media() openai.MediaKind {
	var m openai.MediaKind
	for i := range r.Body.Messages {
		m |= r.Body.Messages[i].Media
	}
	return m
}

// PromptChars is the character count context-length estimates start from:
// the completions prompt, or the sum of the chat message contents. It is
// counted once per request (a plugin's PrepareCycle may count it before
// the scheduler's critical section).
func (r *Request) PromptChars() int {
	if r.promptChars > 0 {
		return r.promptChars - 1
	}
	n := 0
	if r.Body.API.Chat() {
		for i := range r.Body.Messages {
			n += utf8.RuneCountInString(r.Body.Messages[i].Content)
		}
	} else {
		n = utf8.RuneCountInString(r.Body.Prompt)
	}
	r.promptChars = n + 1
	return n
}

// EstimatedTokens estimates the prompt length in tokens: the tokenized
// length when known, otherwise characters x charToToken.
func (r *Request) EstimatedTokens(charToToken float64) float64 {
	if len(r.TokenIDs) > 0 {
		return float64(len(r.TokenIDs))
	}
	return float64(r.PromptChars()) * charToToken
}

// PrefixText returns the bytes approximate prefix matching hashes: the
// completions prompt, or for chat the JSON array of the messages
// ([{"role":"...","content":"..."},...]) so that message boundaries are part
// of the prefix. The result is computed once per request.
func (r *Request) PrefixText() []byte {
	if r.prefixText != nil {
		return r.prefixText
	}
	if !r.Body.API.Chat() {
		r.prefixText = []byte(r.Body.Prompt)
		return r.prefixText
	}
	n := 2
	for i := range r.Body.Messages {
		n += len(r.Body.Messages[i].Role) + len(r.Body.Messages[i].Content) + 32
	}
	b := make([]byte, 0, n)
	b = append(b, '[')
	for i := range r.Body.Messages {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"role":`...)
		b = jsonenc.AppendString(b, r.Body.Messages[i].Role)
		b = append(b, `,"content":`...)
		b = jsonenc.AppendString(b, r.Body.Messages[i].Content)
		b = append(b, '}')
	}
	b = append(b, ']')
	r.prefixText = b
	return b
}
