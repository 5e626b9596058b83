package extproc

import (
	"strconv"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"

	"github.com/hermod/hermod/libs/openai"
)

// refusal is an answer the picker gives a request itself, in place of an
// endpoint: an HTTP status, an OpenAI-shaped error, and why in the data
// plane's logs (%RESPONSE_CODE_DETAILS%, one token). retryAfter > 0 tells
// the client to try again.
func refusal(status int, msg, details string, retryAfter int) openai.Rejection {
	return openai.Rejection{Error: openai.Error{Status: status, Message: msg, RetryAfter: retryAfter}, Details: details}
}

// immediateResponse builds the ImmediateResponse of a rejection.
func immediateResponse(r openai.Rejection, requestID string) *extprocv3.ProcessingResponse {
	hs := []*corev3.HeaderValueOption{setHeader("content-type", "application/json")}
	if requestID != "" {
		hs = append(hs, setHeader(RequestIDHeader, requestID))
	}
	if r.RetryAfter > 0 {
		hs = append(hs, setHeader("retry-after", strconv.Itoa(r.RetryAfter)))
	}
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ImmediateResponse{
		ImmediateResponse: &extprocv3.ImmediateResponse{
			Status:  &typev3.HttpStatus{Code: typev3.StatusCode(r.Status)},
			Headers: &extprocv3.HeaderMutation{SetHeaders: hs},
			Body:    r.Body(),
			Details: r.Details,
		},
	}}
}
