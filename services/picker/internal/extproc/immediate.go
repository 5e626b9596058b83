package extproc

import (
	"encoding/json"
	"net/http"
	"strconv"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// rejection is an answer the picker gives a request itself, in place of an
// endpoint: an HTTP status and an OpenAI-shaped error.
type rejection struct {
	status int
	// code is the OpenAI error code ("model_not_found"); empty: the status.
	code string
	// param names the request field at fault, if one is.
	param string
	msg   string
	// retry sets Retry-After: the request may succeed later.
	retry bool
	// details says why in the data plane's logs (%RESPONSE_CODE_DETAILS%);
	// no spaces.
	details string
}

// pickRejection maps a Pick error onto the answer the client gets (the
// gateway answers the same statuses).
func pickRejection(err error) rejection {
	st := status.Convert(err)
	msg := st.Message()
	switch st.Code() {
	case codes.InvalidArgument:
		return rejection{status: http.StatusBadRequest, msg: msg, details: "hermod_bad_request"}
	case codes.NotFound:
		return rejection{status: http.StatusNotFound, code: "model_not_found", param: "model", msg: msg, details: "hermod_model_not_found"}
	case codes.ResourceExhausted:
		return rejection{status: http.StatusTooManyRequests, msg: msg, retry: true, details: "hermod_request_shed"}
	case codes.Unavailable:
		return rejection{status: http.StatusServiceUnavailable, msg: "no endpoint available: " + msg, retry: true, details: "hermod_no_ready_endpoint"}
	case codes.DeadlineExceeded:
		return rejection{status: http.StatusGatewayTimeout, msg: "the picker did not decide in time", details: "hermod_pick_timeout"}
	}
	return rejection{status: http.StatusInternalServerError, msg: "picking an endpoint failed: " + msg, details: "hermod_pick_failed"}
}

// OpenAI error types by status.
func errorType(code int) string {
	switch {
	case code == http.StatusNotFound:
		return "not_found_error"
	case code == http.StatusTooManyRequests:
		return "rate_limit_error"
	case code == http.StatusServiceUnavailable:
		return "service_unavailable"
	case code >= 500:
		return "server_error"
	}
	return "invalid_request_error"
}

// errorBody is the OpenAI error shape: {"error": {...}}.
type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    any     `json:"code"`
}

// body returns the rejection's JSON body.
func (r rejection) body() []byte {
	d := errorDetail{Message: r.msg, Type: errorType(r.status), Code: r.status}
	if r.param != "" {
		d.Param = &r.param
	}
	if r.code != "" {
		d.Code = r.code
	}
	b, _ := json.Marshal(errorBody{Error: d}) // strings and ints: cannot fail
	return append(b, '\n')
}

// response builds the ImmediateResponse of a rejection.
func (r rejection) response(requestID string) *extprocv3.ProcessingResponse {
	hs := []*corev3.HeaderValueOption{setHeader("content-type", "application/json")}
	if requestID != "" {
		hs = append(hs, setHeader(RequestIDHeader, requestID))
	}
	if r.retry {
		hs = append(hs, setHeader("retry-after", strconv.Itoa(1)))
	}
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ImmediateResponse{
		ImmediateResponse: &extprocv3.ImmediateResponse{
			Status:  &typev3.HttpStatus{Code: typev3.StatusCode(r.status)},
			Headers: &extprocv3.HeaderMutation{SetHeaders: hs},
			Body:    r.body(),
			Details: r.details,
		},
	}}
}
