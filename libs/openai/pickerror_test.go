package openai

import (
	"net/http"
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pickerv1 "github.com/hermod/hermod/libs/api/hermod/picker/v1"
)

func pickErr(t *testing.T, code codes.Code, why pickerv1.PickFailure, msg string) error {
	t.Helper()
	st, err := status.New(code, msg).WithDetails(&errdetails.ErrorInfo{Reason: why.String(), Domain: "hermod.picker"})
	if err != nil {
		t.Fatal(err)
	}
	return st.Err()
}

// Filters that leave no endpoint are not shedding: 503 service_unavailable
// with a code that says no endpoint matched, naming the profile and filter,
// whether or not the request was sheddable.
func TestPickRejectionNoMatch(t *testing.T) {
	msg := `profile "default": no endpoint matched: filter by-gpu (label-selector-filter) left none of the 3 ready endpoints`
	for _, keepable := range []bool{false, true} {
		r := PickRejection(pickErr(t, codes.Unavailable, pickerv1.PickFailure_PICK_FAILURE_NO_MATCH, msg), keepable)
		if r.Status != http.StatusServiceUnavailable || r.Code != CodeNoEndpointMatched || r.Message != msg || r.Details != "hermod_no_endpoint_matched" {
			t.Errorf("keepable %t: %+v", keepable, r)
		}
		body := string(r.Body())
		if !strings.Contains(body, `"type":"service_unavailable"`) || !strings.Contains(body, `"code":"no_endpoint_matched"`) || strings.Contains(body, "rate_limit") {
			t.Errorf("body %s", body)
		}
	}
	// The other picker failures keep their answers.
	if r := PickRejection(pickErr(t, codes.Unavailable, pickerv1.PickFailure_PICK_FAILURE_NO_READY_ENDPOINTS, "none"), false); r.Code != "" || r.Details != "hermod_no_ready_endpoint" {
		t.Errorf("no ready endpoint: %+v", r)
	}
	if r := PickRejection(pickErr(t, codes.ResourceExhausted, pickerv1.PickFailure_PICK_FAILURE_SHED, "shed"), false); r.Status != http.StatusTooManyRequests {
		t.Errorf("shed: %+v", r)
	}
}
