package openai

import (
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
)

// The error shape is OpenAI's: param and code are strings or null, never
// numbers.
func TestErrorShape(t *testing.T) {
	w := httptest.NewRecorder()
	(&Error{Status: 429, Message: "slow down", RetryAfter: 2}).Write(w)
	if w.Code != 429 || w.Header().Get("Retry-After") != "2" || w.Header().Get("Content-Type") != "application/json" {
		t.Errorf("status %d headers %v", w.Code, w.Header())
	}
	var b map[string]map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &b); err != nil {
		t.Fatal(err)
	}
	e := b["error"]
	if e["message"] != "slow down" || e["type"] != TypeRateLimit || e["param"] != nil || e["code"] != nil {
		t.Errorf("body %s", w.Body.String())
	}
	if _, ok := e["code"]; !ok {
		t.Error("code missing: it must be null")
	}
	w = httptest.NewRecorder()
	WriteError(w, 404, "", "model_not_found", "model", "no such model", 0)
	if !strings.Contains(w.Body.String(), `"param":"model"`) || !strings.Contains(w.Body.String(), `"code":"model_not_found"`) ||
		!strings.Contains(w.Body.String(), `"type":"not_found_error"`) || w.Header().Get("Content-Length") != strconv.Itoa(w.Body.Len()) {
		t.Errorf("body %s (length %s)", w.Body.String(), w.Header().Get("Content-Length"))
	}
	if got := BodyErrorResponse(&BodyError{Param: "model", Msg: "required"}); got.Code != "missing_required_parameter" {
		t.Errorf("a missing parameter: code %q", got.Code)
	}
	if got := BodyErrorResponse(&BodyError{Msg: "not JSON"}); got.Code != "" {
		t.Errorf("a body that is not JSON: code %q, want none", got.Code)
	}
	if got := BodyErrorResponse(&BodyError{Param: "messages[1]", Msg: "must be an object"}); got.Status != 400 || got.Param != "messages[1]" || got.Code != "invalid_value" {
		t.Errorf("body error answer %+v", got)
	}
}

func TestPickRejection(t *testing.T) {
	cases := []struct {
		err      error
		keepable bool
		status   int
		code     string
		retry    bool
	}{
		{status.Error(codes.InvalidArgument, "prompt: required"), false, 400, "", false},
		{status.Error(codes.NotFound, "the model `x` does not exist"), false, 404, "model_not_found", false},
		{status.Error(codes.ResourceExhausted, "shed"), false, 429, "", true},
		{status.Error(codes.ResourceExhausted, "shed"), true, 503, "", true},
		{status.Error(codes.Unavailable, "no ready endpoint"), false, 503, "", true},
		{status.Error(codes.DeadlineExceeded, "late"), false, 504, "", false},
		{errors.New("boom"), false, 500, "", false},
	}
	for _, c := range cases {
		r := PickRejection(c.err, c.keepable)
		if r.Status != c.status || r.Code != c.code || (r.RetryAfter > 0) != c.retry || r.Details == "" || strings.Contains(r.Details, " ") {
			t.Errorf("%v (keepable %t): %+v", c.err, c.keepable, r)
		}
	}
}

func TestObservationFill(t *testing.T) {
	picked := time.Unix(100, 0)
	o := Observation{PickedAt: picked, End: picked.Add(3 * time.Second), Streamed: true,
		Observed: Observed{FirstToken: picked.Add(time.Second), Events: 9, Usage: Usage{10, 4, 5}, HaveUsage: true}}
	ev := &eventsv1.RequestCompleted{}
	o.Fill(ev)
	if ev.GetDuration().AsDuration() != 3*time.Second || ev.GetTtft().AsDuration() != time.Second ||
		ev.GetPromptTokens() != 10 || ev.GetCachedTokens() != 4 || ev.GetCompletionTokens() != 5 || ev.GetTpot().AsDuration() != 500*time.Millisecond {
		t.Errorf("streamed with usage: %v", ev)
	}
	o.HaveUsage = false
	ev = &eventsv1.RequestCompleted{}
	o.Fill(ev)
	if ev.GetCompletionTokens() != 9 || ev.GetTpot().AsDuration() != 250*time.Millisecond {
		t.Errorf("streamed without usage counts events: %v", ev)
	}
	o.PromptTokenIDs = 6
	ev = &eventsv1.RequestCompleted{}
	if o.Fill(ev); ev.GetPromptTokens() != 6 {
		t.Errorf("a prompt of token ids without usage counts its ids: %v", ev)
	}
	o.HaveUsage = true
	ev = &eventsv1.RequestCompleted{}
	if o.Fill(ev); ev.GetPromptTokens() != 10 {
		t.Errorf("the answer's usage wins over the ids: %v", ev)
	}
	o.HaveUsage, o.PromptTokenIDs = false, 0
	o.Streamed = false
	ev = &eventsv1.RequestCompleted{}
	o.Fill(ev)
	if ev.GetCompletionTokens() != 0 || ev.GetTpot() != nil {
		t.Errorf("not streamed, no usage: %v", ev)
	}
	if OutcomeLabel(eventsv1.CompletionOutcome_COMPLETION_OUTCOME_UNSPECIFIED) != OutcomeFailed ||
		OutcomeLabel(eventsv1.CompletionOutcome_COMPLETION_OUTCOME_CANCELED) != OutcomeCanceled {
		t.Error("outcome labels")
	}
}

func TestAPIOfPath(t *testing.T) {
	for path, want := range map[string]API{"/v1/completions": APICompletions, "/v1/chat/completions/": APIChatCompletions, "/v1/chat/completions?x=1": APIChatCompletions, "/v1/models": 0} {
		if got, ok := APIOfPath(path); got != want || ok != (want != 0) {
			t.Errorf("%s: %v %t", path, got, ok)
		}
		if want != 0 && !strings.HasPrefix(path, want.Path()) {
			t.Errorf("%v.Path() = %s", want, want.Path())
		}
	}
}
