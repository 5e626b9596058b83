package openai

import (
	"net/http"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pickerv1 "github.com/hermod/hermod/libs/api/hermod/picker/v1"
)

// CodeNoEndpointMatched is the error code of a request no endpoint could
// take because the pool's scheduling profile filtered every ready endpoint
// out: the config matches none of the fleet. The answer is a 503 (not a 429:
// nothing is overloaded) whose message names the profile and the filter.
const CodeNoEndpointMatched = "no_endpoint_matched"

// pickErrorDomain is the domain of the ErrorInfo of a picker's errors.
const pickErrorDomain = "hermod.picker"

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
// retry, where a sheddable one gets 429. A profile whose filters matched
// no endpoint is a 503 with code CodeNoEndpointMatched, sheddable or not.
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
		if pickFailure(st) == pickerv1.PickFailure_PICK_FAILURE_NO_MATCH {
			return reject(http.StatusServiceUnavailable, CodeNoEndpointMatched, "", msg, 0, "hermod_no_endpoint_matched")
		}
		return reject(http.StatusServiceUnavailable, "", "", "no endpoint available: "+msg, 1, "hermod_no_ready_endpoint")
	case codes.DeadlineExceeded:
		return reject(http.StatusGatewayTimeout, "", "", "the picker did not decide in time", 0, "hermod_pick_timeout")
	}
	return reject(http.StatusInternalServerError, "", "", "picking an endpoint failed: "+msg, 0, "hermod_pick_failed")
}

func reject(status int, code, param, msg string, retryAfter int, details string) Rejection {
	return Rejection{Error: Error{Status: status, Code: code, Param: param, Message: msg, RetryAfter: retryAfter}, Details: details}
}

// pickFailure is the PickFailure a picker gave an error (the reason of its
// google.rpc.ErrorInfo), PICK_FAILURE_UNSPECIFIED when it gave none.
func pickFailure(st *status.Status) pickerv1.PickFailure {
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == pickErrorDomain {
			return pickerv1.PickFailure(pickerv1.PickFailure_value[info.GetReason()])
		}
	}
	return pickerv1.PickFailure_PICK_FAILURE_UNSPECIFIED
}
