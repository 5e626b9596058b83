package proxy

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	pickerv1 "github.com/hermod/hermod/libs/api/hermod/picker/v1"
)

const messagesStream = "event: message_start\n" +
	`data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"m","usage":{"input_tokens":9,"output_tokens":1,"cache_read_input_tokens":4}}}` + "\n\n" +
	"event: content_block_start\n" +
	`data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}` + "\n\n" +
	"event: content_block_delta\n" +
	`data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hello"}}` + "\n\n" +
	"event: content_block_stop\n" +
	`data: {"type":"content_block_stop","index":0}` + "\n\n" +
	"event: message_delta\n" +
	`data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":5}}` + "\n\n"

const messagesStop = "event: message_stop\n" + `data: {"type":"message_stop"}` + "\n\n"

// TestMessagesStreamIsAccountedAndUntouched: an Anthropic stream is passed
// on byte for byte (no usage option is added to the request, nothing is
// stripped from the answer), and its tokens come from message_start and
// message_delta.
func TestMessagesStreamIsAccountedAndUntouched(t *testing.T) {
	var upstreamBody []byte
	var upstreamPath string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		upstreamBody, _ = io.ReadAll(r.Body)
		upstreamPath = r.URL.Path
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, messagesStream+messagesStop)
	}))
	defer up.Close()
	g := newGateway(t, hostPort(up.URL))
	body := `{"model":"m","max_tokens":16,"stream":true,"system":"be brief","messages":[{"role":"user","content":"hi"}]}`
	resp, err := http.Post(g.url+"/v1/messages", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(got) != messagesStream+messagesStop {
		t.Errorf("%d, stream changed on its way:\n%s", resp.StatusCode, got)
	}
	if string(upstreamBody) != body || upstreamPath != "/v1/messages" {
		t.Errorf("upstream got %s %s", upstreamPath, upstreamBody)
	}
	ev := g.reporter.wait(t, 1)[0]
	if ev.GetOutcome() != eventsv1.CompletionOutcome_COMPLETION_OUTCOME_SUCCESS || !ev.GetStreamed() ||
		ev.GetPromptTokens() != 9 || ev.GetCompletionTokens() != 5 || ev.GetCachedTokens() != 4 {
		t.Errorf("completion %v", ev)
	}
	g.picker.mu.Lock()
	req := g.picker.reqs[0]
	g.picker.mu.Unlock()
	if req.GetApi() != pickerv1.Api_API_MESSAGES || req.GetRequest().GetModel() != "m" {
		t.Errorf("pick request %v", req)
	}
}

// TestMessagesAnswerIsAccounted: a whole Messages answer's usage is read.
func TestMessagesAnswerIsAccounted(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/v1/messages/count_tokens" {
			_, _ = io.WriteString(w, `{"input_tokens":11}`)
			return
		}
		_, _ = io.WriteString(w, `{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","usage":{"input_tokens":12,"output_tokens":2}}`)
	}))
	defer up.Close()
	g := newGateway(t, hostPort(up.URL))
	resp, err := http.Post(g.url+"/v1/messages", "application/json", strings.NewReader(`{"model":"m","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if ev := g.reporter.wait(t, 1)[0]; ev.GetPromptTokens() != 12 || ev.GetCompletionTokens() != 2 || ev.GetStreamed() {
		t.Errorf("completion %v", ev)
	}
	// count_tokens is routed by its model and answered as the pod answers;
	// it generated nothing, so it counts no tokens.
	resp, err = http.Post(g.url+"/v1/messages/count_tokens", "application/json", strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(b) != `{"input_tokens":11}` {
		t.Errorf("count_tokens: %d %s", resp.StatusCode, b)
	}
	if ev := g.reporter.wait(t, 2)[1]; ev.GetCompletionTokens() != 0 {
		t.Errorf("count_tokens completion %v", ev)
	}
}

// TestMessagesErrorsAreAnthropicShaped: whatever refuses a Messages request
// (its parse, the picker) answers in Anthropic's error shape, which its
// SDKs decode.
func TestMessagesErrorsAreAnthropicShaped(t *testing.T) {
	g := newGateway(t, "127.0.0.1:1")
	for _, c := range []struct {
		body    string
		pickErr error
		code    int
		errType string
	}{
		{`{"model":"m","messages":[{"role":"user","content":"hi"}]}`, nil, 400, "invalid_request_error"}, // no max_tokens
		{`{"model":"m","max_tokens":8,"messages":[]}`, nil, 400, "invalid_request_error"},
		{`{"model":"m","max_tokens":8,"messages":`, nil, 400, "invalid_request_error"},
		{`{"model":"nope","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`, status.Error(codes.NotFound, "the model `nope` does not exist"), 404, "not_found_error"},
		{`{"model":"m","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`, status.Error(codes.ResourceExhausted, "shed"), 429, "rate_limit_error"},
		{`{"model":"m","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`, status.Error(codes.Unavailable, "no ready endpoints"), 503, "overloaded_error"},
		{`{"model":"m","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`, status.Error(codes.Internal, "boom"), 500, "api_error"},
	} {
		g.picker.mu.Lock()
		g.picker.err = c.pickErr
		g.picker.mu.Unlock()
		resp, err := http.Post(g.url+"/v1/messages", "application/json", strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var e struct {
			Type  string
			Error struct{ Type, Message string }
		}
		if resp.StatusCode != c.code || json.Unmarshal(b, &e) != nil || e.Type != "error" || e.Error.Type != c.errType || e.Error.Message == "" {
			t.Errorf("%.40s: %d %s, want %d %s", c.body, resp.StatusCode, b, c.code, c.errType)
		}
	}
}

// TestBrokenMessagesStreamEndsWithAnErrorEvent: a Messages stream that
// stops before message_stop ends with Anthropic's error event.
func TestBrokenMessagesStreamEndsWithAnErrorEvent(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, messagesStream)
	}))
	defer up.Close()
	g := newGateway(t, hostPort(up.URL))
	resp, err := http.Post(g.url+"/v1/messages", "application/json",
		strings.NewReader(`{"model":"m","max_tokens":8,"stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if l := sc.Text(); l != "" {
			lines = append(lines, l)
		}
	}
	resp.Body.Close()
	if len(lines) < 2 || lines[len(lines)-2] != "event: error" {
		t.Fatalf("the stream ends with %q", lines)
	}
	var e struct {
		Type  string
		Error struct{ Type, Message string }
	}
	data, _ := strings.CutPrefix(lines[len(lines)-1], "data: ")
	if json.Unmarshal([]byte(data), &e) != nil || e.Type != "error" || e.Error.Type != "api_error" || strings.Contains(e.Error.Message, "127.0.0.1") {
		t.Errorf("error event %q", data)
	}
	if ev := g.reporter.wait(t, 1)[0]; ev.GetOutcome() != eventsv1.CompletionOutcome_COMPLETION_OUTCOME_FAILED || ev.GetCompletionTokens() != 5 {
		t.Errorf("completion %v", ev)
	}
}
