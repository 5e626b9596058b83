package extproc

import (
	"bytes"
	"encoding/json"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	pickerv1 "github.com/hermod/hermod/libs/api/hermod/picker/v1"
)

// messagesSSE is an Anthropic Messages stream as a vLLM pod sends it,
// cut where Envoy might cut it.
var messagesSSE = []string{
	"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"usage\":{\"input_tokens\":9,\"output_tokens\":1}}}\n\n",
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\nevent: message_de",
	"lta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":5}}\n\n",
	"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
}

// An Anthropic Messages request through Envoy: picked as one, its stream
// passed back intact and accounted from message_start and message_delta.
func TestMessagesThroughEnvoy(t *testing.T) {
	e := newTestEnv(t, nil)
	s := e.open()
	body := []byte(`{"model":"llama","max_tokens":32,"stream":true,"system":"be brief","messages":[{"role":"user","content":"hello there"}]}`)
	s.send(post(fullDuplex, "/v1/messages", "x-api-key", "secret"), requestBody(body, true))
	if h := s.recv().GetRequestHeaders(); h == nil {
		t.Fatal("want the request headers answer first")
	}
	if got, _ := s.readBody(true, 0, true); !bytes.Equal(got, body) {
		t.Fatalf("body streamed back %q", got)
	}
	reqs := e.picker.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d picks", len(reqs))
	}
	pr := reqs[0]
	msgs := pr.GetRequest().GetMessages()
	if pr.GetApi() != pickerv1.Api_API_MESSAGES || pr.GetRequest().GetModel() != "llama" || pr.GetRequest().GetMaxTokens() != 32 ||
		len(msgs) != 2 || msgs[0].GetRole() != "system" || msgs[1].GetContent() != "hello there" {
		t.Errorf("pick request %v", pr)
	}
	if _, ok := pr.GetHeaders()["x-api-key"]; ok {
		t.Errorf("the pick saw the client's key: %v", pr.GetHeaders())
	}
	s.send(responseHeaders(false, ":status", "200", "content-type", "text/event-stream"))
	_ = s.recv()
	var sent, echoed []byte
	for i, c := range messagesSSE {
		last := i == len(messagesSSE)-1
		s.send(responseBody([]byte(c), last))
		sent = append(sent, c...)
		b, _ := s.readBody(false, len(c), last)
		echoed = append(echoed, b...)
	}
	if !bytes.Equal(sent, echoed) {
		t.Errorf("response echoed %q", echoed)
	}
	e.waitCompletions(1)
	s.close()
	ev := e.done.all()[0]
	if ev.GetOutcome() != eventsv1.CompletionOutcome_COMPLETION_OUTCOME_SUCCESS || !ev.GetStreamed() ||
		ev.GetPromptTokens() != 9 || ev.GetCompletionTokens() != 5 {
		t.Errorf("completion %v", ev)
	}
}

// A Messages request the picker refuses is answered in Anthropic's error
// shape, which its SDKs decode.
func TestMessagesImmediateResponseIsAnthropicShaped(t *testing.T) {
	e := newTestEnv(t, nil)
	e.picker.err = status.Error(codes.NotFound, "the model `x` does not exist")
	s := e.open()
	_ = s.c.Send(post(fullDuplex, "/v1/messages"))
	_ = s.c.Send(requestBody([]byte(`{"model":"x","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`), true))
	ir := s.recv().GetImmediateResponse()
	if ir == nil {
		t.Fatal("want an immediate response")
	}
	var eb struct {
		Type  string `json:"type"`
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if int(ir.GetStatus().GetCode()) != 404 || json.Unmarshal(ir.GetBody(), &eb) != nil || eb.Type != "error" ||
		eb.Error.Type != "not_found_error" || eb.Error.Message == "" {
		t.Errorf("immediate response %d %s", ir.GetStatus().GetCode(), ir.GetBody())
	}
	s.ended()
}

// vLLM's other endpoints are routed by the model their body (or form)
// names, the body passed back intact.
func TestPassthroughEndpointsAreRouted(t *testing.T) {
	e := newTestEnv(t, nil)
	for i, c := range []struct {
		path, contentType, body, model string
	}{
		{"/v1/embeddings", "application/json", `{"model":"llama","input":"abc"}`, "llama"},
		{"/v1/audio/transcriptions", "multipart/form-data; boundary=xx", "--xx\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nwhisper\r\n--xx--\r\n", "whisper"},
		{"/pooling", "application/octet-stream", "\x00\x01", ""},
	} {
		s := e.open()
		s.send(requestHeaders(fullDuplex, false, ":method", "POST", ":path", c.path, "content-type", c.contentType, "x-request-id", "req-1"), requestBody([]byte(c.body), true))
		if h := s.recv().GetRequestHeaders(); h == nil {
			t.Fatalf("%s: want the request headers answer", c.path)
		}
		if got, _ := s.readBody(true, 0, true); string(got) != c.body {
			t.Errorf("%s: body streamed back %q", c.path, got)
		}
		pr := e.picker.requests()[i]
		if pr.GetApi() != pickerv1.Api_API_PASSTHROUGH || pr.GetRequest().GetModel() != c.model {
			t.Errorf("%s: pick request %v", c.path, pr)
		}
		s.send(responseHeaders(false, ":status", "200", "content-type", "application/json"))
		_ = s.recv()
		s.send(responseBody([]byte(`{"usage":{"prompt_tokens":3,"total_tokens":3}}`), true))
		_, _ = s.readBody(false, 0, true)
		e.waitCompletions(i + 1)
		s.close()
	}
	if ev := e.done.all()[0]; ev.GetPromptTokens() != 3 || ev.GetOutcome() != eventsv1.CompletionOutcome_COMPLETION_OUTCOME_SUCCESS {
		t.Errorf("embeddings completion %v", ev)
	}
}
