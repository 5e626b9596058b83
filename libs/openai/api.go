package openai

import (
	"slices"
	"strings"
)

// API is the endpoint a request was sent to: one of the OpenAI APIs, the
// Anthropic Messages API that vLLM serves beside them, or vLLM's own
// token-in, token-out generate API.
type API uint8

// The APIs Hermod routes.
const (
	APICompletions API = iota + 1
	APIChatCompletions
	// APIMessages is Anthropic's Messages API (/v1/messages).
	APIMessages
	// APIMessagesCountTokens is its token counting (/v1/messages/count_tokens):
	// a body like a Messages request, answered with {"input_tokens": n}.
	APIMessagesCountTokens
	// APIGenerate is vLLM's /inference/v1/generate: a prompt of token ids
	// (token_ids), its limits in sampling_params, answered (and streamed)
	// as OpenAI chunks of generated token ids with OpenAI's usage.
	APIGenerate
	// APIPassthrough is every other endpoint a vLLM server answers
	// (PassthroughPaths): routed by its model where its body names one,
	// its body otherwise passed on unread and its answer unchanged.
	APIPassthrough

	lastAPI = APIPassthrough
)

// PassthroughPaths are the vLLM endpoints served as APIPassthrough:
// embeddings and pooling, scoring and reranking, tokenizing, rendering a
// prompt, and audio transcription.
var PassthroughPaths = []string{
	"/v1/embeddings", "/pooling", "/classify", "/score", "/v1/score", "/rerank", "/v1/rerank", "/v2/rerank",
	"/tokenize", "/detokenize", "/v1/completions/render", "/v1/chat/completions/render",
	"/v1/audio/transcriptions", "/v1/audio/translations",
}

// Valid says whether a is one of the APIs.
func (a API) Valid() bool { return a >= APICompletions && a <= lastAPI }

func (a API) String() string {
	switch a {
	case APICompletions:
		return "completions"
	case APIChatCompletions:
		return "chat_completions"
	case APIMessages:
		return "messages"
	case APIMessagesCountTokens:
		return "messages_count_tokens"
	case APIGenerate:
		return "generate"
	case APIPassthrough:
		return "passthrough"
	}
	return "unknown"
}

// Path is the API's URL path ("" for APIPassthrough, served at many).
func (a API) Path() string {
	switch a {
	case APICompletions:
		return "/v1/completions"
	case APIChatCompletions:
		return "/v1/chat/completions"
	case APIMessages:
		return "/v1/messages"
	case APIMessagesCountTokens:
		return "/v1/messages/count_tokens"
	case APIGenerate:
		return "/inference/v1/generate"
	}
	return ""
}

// Describe names the API for a message: its path, or for APIPassthrough
// the paths it is served at.
func (a API) Describe() string {
	if a == APIPassthrough {
		return "vLLM's other endpoints (" + strings.Join(PassthroughPaths, ", ") + ")"
	}
	if p := a.Path(); p != "" {
		return p
	}
	return a.String()
}

// Chat says whether the API's prompt is a list of chat messages (rendered
// by the model's chat template), not a completions prompt.
func (a API) Chat() bool {
	return a == APIChatCompletions || a == APIMessages || a == APIMessagesCountTokens
}

// Anthropic says whether the API speaks Anthropic's wire: its request
// shape, its stream events and its error shape.
func (a API) Anthropic() bool {
	return a == APIMessages || a == APIMessagesCountTokens
}

// Generates says whether the API's answer is generated tokens (with
// usage, and a stream when asked for); token counting is not.
func (a API) Generates() bool {
	return a == APICompletions || a == APIChatCompletions || a == APIMessages || a == APIGenerate
}

// APIOfPath returns the API served at an URL path (a query and a trailing
// slash are ignored); ok is false for any other path.
func APIOfPath(path string) (api API, ok bool) {
	if i := strings.IndexByte(path, '?'); i >= 0 {
		path = path[:i]
	}
	switch strings.TrimSuffix(path, "/") {
	case "/v1/completions":
		return APICompletions, true
	case "/v1/chat/completions":
		return APIChatCompletions, true
	case "/v1/messages":
		return APIMessages, true
	case "/v1/messages/count_tokens":
		return APIMessagesCountTokens, true
	case "/inference/v1/generate":
		return APIGenerate, true
	}
	if slices.Contains(PassthroughPaths, strings.TrimSuffix(path, "/")) {
		return APIPassthrough, true
	}
	return 0, false
}

// AnthropicPath says whether an URL path is under Anthropic's Messages API
// (/v1/messages and below), whose errors take Anthropic's shape.
func AnthropicPath(path string) bool {
	rest, ok := strings.CutPrefix(path, "/v1/messages")
	return ok && (rest == "" || rest[0] == '/' || rest[0] == '?')
}
