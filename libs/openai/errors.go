package openai

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// Error types of the OpenAI error shape.
const (
	TypeInvalidRequest = "invalid_request_error"
	TypeAuthentication = "authentication_error"
	TypePermission     = "permission_error"
	TypeNotFound       = "not_found_error"
	TypeRateLimit      = "rate_limit_error"
	TypeServer         = "server_error"
	TypeUnavailable    = "service_unavailable"
)

// Error is an error as the OpenAI API answers it: an HTTP status and the
// body {"error": {"message", "type", "param", "code"}}, param and code a
// string or null.
type Error struct {
	Status int
	// Type is the error type; empty: TypeForStatus(Status).
	Type string
	// Code is the OpenAI error code ("model_not_found"), or empty (null).
	Code string
	// Param names the request member at fault, or is empty (null).
	Param   string
	Message string
	// RetryAfter > 0 sets Retry-After (seconds): the request may succeed
	// later.
	RetryAfter int
	// Anthropic: answer in Anthropic's error shape, {"type": "error",
	// "error": {"type", "message"}}, the type Anthropic's for the status.
	Anthropic bool
}

func (e *Error) Error() string { return e.Message }

// errorJSON is the wire shape.
type errorJSON struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

// anthropicErrorJSON is Anthropic's wire shape.
type anthropicErrorJSON struct {
	Type  string `json:"type"`
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

// Body returns the error's JSON body, newline-terminated.
func (e *Error) Body() []byte {
	if e.Anthropic {
		var w anthropicErrorJSON
		w.Type, w.Error.Type, w.Error.Message = "error", AnthropicTypeForStatus(e.Status), e.Message
		b, _ := json.Marshal(w) // strings only: cannot fail
		return append(b, '\n')
	}
	var w errorJSON
	w.Error.Message = e.Message
	w.Error.Type = e.Type
	if w.Error.Type == "" {
		w.Error.Type = TypeForStatus(e.Status)
	}
	if e.Param != "" {
		w.Error.Param = &e.Param
	}
	if e.Code != "" {
		w.Error.Code = &e.Code
	}
	b, _ := json.Marshal(w) // strings only: cannot fail
	return append(b, '\n')
}

// Event returns the error as a server-sent event, "data: {"error":
// {...}}" and its blank line (Anthropic's: "event: error" first): how a
// stream that already began tells its client that it failed.
func (e *Error) Event() []byte {
	b := e.Body()
	out := make([]byte, 0, len(b)+22)
	if e.Anthropic {
		out = append(out, "event: error\n"...)
	}
	out = append(out, "data: "...)
	out = append(out, b[:len(b)-1]...) // Body ends with a newline
	return append(out, "\n\n"...)
}

// Write answers the error on w.
func (e *Error) Write(w http.ResponseWriter) {
	b := e.Body()
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	if e.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	w.WriteHeader(e.Status)
	_, _ = w.Write(b)
}

// WriteError answers an OpenAI-shaped error: typ is the error type (empty:
// the status's), code the OpenAI error code or empty, param the member at
// fault or empty; retryAfter > 0 sets Retry-After (seconds).
func WriteError(w http.ResponseWriter, status int, typ, code, param, msg string, retryAfter int) {
	(&Error{Status: status, Type: typ, Code: code, Param: param, Message: msg, RetryAfter: retryAfter}).Write(w)
}

// TypeForStatus is the error type that goes with an HTTP status.
func TypeForStatus(status int) string {
	switch {
	case status == http.StatusUnauthorized:
		return TypeAuthentication
	case status == http.StatusForbidden:
		return TypePermission
	case status == http.StatusNotFound:
		return TypeNotFound
	case status == http.StatusTooManyRequests:
		return TypeRateLimit
	case status == http.StatusServiceUnavailable:
		return TypeUnavailable
	case status >= 500:
		return TypeServer
	}
	return TypeInvalidRequest
}

// BodyErrorResponse is the answer to a body Parse refused.
func BodyErrorResponse(err *BodyError) *Error {
	e := &Error{Status: http.StatusBadRequest, Param: err.Param, Message: err.Error()}
	switch {
	case err.Param == "":
		// the body is not JSON: OpenAI gives no code
	case err.Msg == "required":
		e.Code = "missing_required_parameter"
	default:
		e.Code = "invalid_value"
	}
	return e
}

// AnthropicTypeForStatus is Anthropic's error type for an HTTP status.
func AnthropicTypeForStatus(status int) string {
	switch {
	case status == http.StatusUnauthorized:
		return "authentication_error"
	case status == http.StatusPaymentRequired:
		return "billing_error"
	case status == http.StatusForbidden:
		return "permission_error"
	case status == http.StatusNotFound:
		return "not_found_error"
	case status == http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case status == http.StatusTooManyRequests:
		return "rate_limit_error"
	case status == http.StatusGatewayTimeout:
		return "timeout_error"
	case status == http.StatusServiceUnavailable || status == 529:
		return "overloaded_error"
	case status >= 500:
		return "api_error"
	}
	return "invalid_request_error"
}
