// Package openai holds what the gateway knows of the OpenAI HTTP API: the
// error shape, a fast look at request bodies (model, stream, usage
// options), and the usage reported in responses and streams.
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
	TypeNotFound       = "not_found_error"
	TypeRateLimit      = "rate_limit_error"
	TypeServer         = "server_error"
	TypeUnavailable    = "service_unavailable"
)

// ErrorBody is the OpenAI error response: {"error": {...}}.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is the inside of an OpenAI error response.
type ErrorDetail struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    any     `json:"code"`
}

// WriteError writes an OpenAI-shaped error. code is the OpenAI error code
// ("model_not_found", ...) or empty; param names the offending field or is
// empty. retryAfter > 0 sets Retry-After (seconds).
func WriteError(w http.ResponseWriter, status int, typ, code, param, msg string, retryAfter int) {
	d := ErrorDetail{Message: msg, Type: typ}
	if param != "" {
		d.Param = &param
	}
	if code != "" {
		d.Code = code
	} else {
		d.Code = status
	}
	b, _ := json.Marshal(ErrorBody{Error: d})
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)+1))
	if retryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(retryAfter))
	}
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// TypeForStatus is the error type that goes with an HTTP status.
func TypeForStatus(status int) string {
	switch {
	case status == http.StatusUnauthorized:
		return TypeAuthentication
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
