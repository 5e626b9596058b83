package openai

import (
	"net/http"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Rejection is the answer a client gets for a request that was not
// routed, and why in the data plane's words.
type Rejection struct {
	Error
	// Details says why, for access logs (Envoy's
	// %RESPONSE_CODE_DETAILS%): one token, no spaces.
	Details string
}

// PickRejection maps a Pick error (a gRPC status) onto the client's
// answer. keepable says flow control classified the request as not
// sheddable: when every endpoint is full it is refused with 503, to
// retry, where a sheddable one gets 429.
func PickRejection(err error, keepable bool) Rejection {
	st := status.Convert(err)
	msg := st.Message()
	switch st.Code() {
	case codes.InvalidArgument:
		return reject(http.StatusBadRequest, "", "", msg, 0, "hermod_bad_request")
	case codes.NotFound:
		return reject(http.StatusNotFound, "model_not_found", "model", msg, 0, "hermod_model_not_found")
	case codes.ResourceExhausted:
		code := http.StatusTooManyRequests
		if keepable {
			code = http.StatusServiceUnavailable
		}
		return reject(code, "", "", msg, 1, "hermod_request_shed")
	case codes.Unavailable, codes.Canceled:
		return reject(http.StatusServiceUnavailable, "", "", "no endpoint available: "+msg, 1, "hermod_no_ready_endpoint")
	case codes.DeadlineExceeded:
		return reject(http.StatusGatewayTimeout, "", "", "the picker did not decide in time", 0, "hermod_pick_timeout")
	}
	return reject(http.StatusInternalServerError, "", "", "picking an endpoint failed: "+msg, 0, "hermod_pick_failed")
}

func reject(status int, code, param, msg string, retryAfter int, details string) Rejection {
	return Rejection{Error: Error{Status: status, Code: code, Param: param, Message: msg, RetryAfter: retryAfter}, Details: details}
}
