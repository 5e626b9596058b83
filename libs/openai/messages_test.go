package openai

import (
	"bytes"
	"errors"
	"net/http/httptest"
	"testing"
)

func TestParseMessages(t *testing.T) {
	body := `{"model":"claude-x","max_tokens":64,"stream":true,
		"system":[{"type":"text","text":"You are terse."},{"type":"text","text":" Answer in French.","cache_control":{"type":"ephemeral"}}],
		"messages":[
			{"role":"user","content":"What is in /etc?"},
			{"role":"assistant","content":[{"type":"thinking","thinking":"list it","signature":"sig"},{"type":"text","text":"Let me look."},{"type":"tool_use","id":"tu_1","name":"ls","input":{"path":"/etc"}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"tu_1","content":[{"type":"text","text":"hosts passwd"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}}]},{"type":"text","text":"and?"}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"tu_2","content":"plain result"}]}
		]}`
	r, err := Parse(APIMessages, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	want := []Message{
		{Role: "system", Content: "You are terse. Answer in French."},
		{Role: "user", Content: "What is in /etc?"},
		{Role: "assistant", Content: `list itLet me look.{"path":"/etc"}`},
		{Role: "user", Content: "hosts passwdand?", Media: MediaImage},
		{Role: "user", Content: "plain result"},
	}
	if r.Model != "claude-x" || r.MaxTokens != 64 || !r.Stream || len(r.Messages) != len(want) {
		t.Fatalf("parsed %+v", r)
	}
	for i := range want {
		if !sameText(r.Messages[i], want[i]) {
			t.Errorf("message %d: %+v, want %+v", i, r.Messages[i], want[i])
		}
	}
	if items := r.Messages[3].Items; len(items) != 1 || items[0].Kind != MediaImage {
		t.Errorf("the tool result's image: %+v", items)
	}
	// through the proto as the gateway sends it to the picker
	if back := FromProto(APIMessages, r.Proto()); !equalRequests(back, r) {
		t.Errorf("through the proto: %+v", back)
	}
	if got, ok := APIOfPick(APIMessages.PickAPI()); !ok || got != APIMessages {
		t.Errorf("pick api: %v", got)
	}
	// count_tokens takes the same body without max_tokens
	if r, err := Parse(APIMessagesCountTokens, []byte(`{"model":"m","system":"s","messages":[{"role":"user","content":"hi"}]}`)); err != nil || len(r.Messages) != 2 {
		t.Errorf("count_tokens: %+v %v", r, err)
	}
	// max_completion_tokens is OpenAI's: a Messages body's limit is its max_tokens
	if r, err := Parse(APIMessages, []byte(`{"model":"m","max_tokens":8,"max_completion_tokens":99,"messages":[{"role":"user","content":"hi"}]}`)); err != nil || r.MaxTokens != 8 {
		t.Errorf("max_completion_tokens on a Messages body: %+v %v", r, err)
	}
}

func TestParseMessagesRefuses(t *testing.T) {
	for body, param := range map[string]string{
		`{"model":"m","messages":[{"role":"user","content":"hi"}]}`:                                                "max_tokens",
		`{"model":"m","max_tokens":1}`:                                                                             "messages",
		`{"model":"m","max_tokens":1,"messages":[]}`:                                                               "messages",
		`{"max_tokens":1,"messages":[{"role":"user","content":"hi"}]}`:                                             "model",
		`{"model":"m","max_tokens":-1,"messages":[{"role":"user","content":"hi"}]}`:                                "max_tokens",
		`{"model":"m","max_tokens":1,"system":7,"messages":[{"role":"user","content":"hi"}]}`:                      "system",
		`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"tool_result","content":5}]}]}`: "messages[0].content[0].content",
	} {
		_, err := Parse(APIMessages, []byte(body))
		var be *BodyError
		if !errors.As(err, &be) || be.Param != param {
			t.Errorf("%s: %v, want an error on %s", body, err, param)
		}
	}
	// a tool result nests one level of blocks; deeper nesting is skipped,
	// not followed
	deep := `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"tool_result","content":[{"type":"tool_result","content":[{"type":"text","text":"deep"}]},{"type":"text","text":"kept"}]}]}]}`
	if r, err := Parse(APIMessages, []byte(deep)); err != nil || r.Messages[0].Content != "kept" {
		t.Errorf("nested tool results: %+v %v", r, err)
	}
}

func TestAccountantMessagesStream(t *testing.T) {
	stream := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"usage\":{\"input_tokens\":12,\"cache_read_input_tokens\":4,\"output_tokens\":1}}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
		"event: ping\ndata: {\"type\": \"ping\"}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"say \\\"message_stop\\\" \"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"usage\"}}\n\n" +
		"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":2}}\n\n"
	end := "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	for _, size := range []int{1, 5, 64, len(stream + end)} {
		a := NewAccountantFor(APIMessages, true, true)
		out := feedAll(a, []byte(stream+end), bytes.Repeat([]byte{byte(size - 1)}, len(stream+end)))
		o := a.Observed()
		if string(out) != stream+end || !o.Done || !o.HaveUsage || o.Usage != (Usage{PromptTokens: 12, CachedTokens: 4, CompletionTokens: 2}) || o.Events != 2 || o.FirstToken.IsZero() {
			t.Errorf("%d bytes at a time: %+v (passed on as sent: %t)", size, o, string(out) == stream+end)
		}
	}
	// without message_stop the stream is not done, though the delta
	// spoke of it
	a := NewAccountantFor(APIMessages, true, false)
	feedAll(a, []byte(stream), nil)
	if a.Observed().Done {
		t.Error("a stream without message_stop is done")
	}
	if ev := a.Broken(&Error{Status: 502, Message: "cut", Anthropic: true}); string(ev) != "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"cut\"}}\n\n" {
		t.Errorf("broken: %q", ev)
	}
	// a whole answer's usage
	b := NewAccountantFor(APIMessages, false, false)
	feedAll(b, []byte(`{"id":"msg_1","type":"message","content":[{"type":"text","text":"hi"}],"usage":{"input_tokens":9,"output_tokens":3}}`), nil)
	if o := b.Observed(); !o.HaveUsage || o.Usage != (Usage{PromptTokens: 9, CompletionTokens: 3}) {
		t.Errorf("answer usage: %+v", o)
	}
}

func TestAnthropicErrorShape(t *testing.T) {
	for status, typ := range map[int]string{400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error", 413: "request_too_large",
		429: "rate_limit_error", 500: "api_error", 502: "api_error", 503: "overloaded_error", 529: "overloaded_error"} {
		rec := httptest.NewRecorder()
		(&Error{Status: status, Message: "m", Code: "ignored", Anthropic: true, RetryAfter: 2}).Write(rec)
		want := `{"type":"error","error":{"type":"` + typ + `","message":"m"}}` + "\n"
		if rec.Code != status || rec.Body.String() != want || rec.Header().Get("Content-Type") != "application/json" || rec.Header().Get("Retry-After") != "2" {
			t.Errorf("%d: %d %q %v", status, rec.Code, rec.Body.String(), rec.Header())
		}
	}
	for path, want := range map[string]bool{"/v1/messages": true, "/v1/messages/count_tokens": true, "/v1/messages?beta=true": true,
		"/v1/messagesx": false, "/v1/chat/completions": false} {
		if AnthropicPath(path) != want {
			t.Errorf("AnthropicPath(%q) = %t", path, !want)
		}
	}
}
