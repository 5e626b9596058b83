package openai

import "strings"

// API is the OpenAI endpoint a request was sent to.
type API uint8

// The OpenAI APIs Hermod routes.
const (
	APICompletions API = iota + 1
	APIChatCompletions
)

func (a API) String() string {
	switch a {
	case APICompletions:
		return "completions"
	case APIChatCompletions:
		return "chat_completions"
	}
	return "unknown"
}

// Path is the API's URL path.
func (a API) Path() string {
	switch a {
	case APICompletions:
		return "/v1/completions"
	case APIChatCompletions:
		return "/v1/chat/completions"
	}
	return ""
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
	}
	return 0, false
}
