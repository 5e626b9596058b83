package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/hermod/hermod/tools/vllm-sim/internal/engine"
)

// anthropicUsage, anthropicMessage and anthropicError are Anthropic's
// shapes, decoded strictly.
type anthropicUsage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
}

type anthropicMessage struct {
	ID      string `json:"id"`
	Type    string `json:"type"`
	Role    string `json:"role"`
	Model   string `json:"model"`
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	StopReason   *string         `json:"stop_reason"`
	StopSequence *string         `json:"stop_sequence"`
	Usage        *anthropicUsage `json:"usage"`
}

type anthropicError struct {
	Type  string `json:"type"`
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

// topLevelKeys returns the member names of a JSON object, in order.
func topLevelKeys(t *testing.T, b []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not an object: %s", b)
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

// countTokens asks /v1/messages/count_tokens about body.
func countTokens(t *testing.T, url, body string) int {
	t.Helper()
	resp, b := post(t, url+"/v1/messages/count_tokens", body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("count_tokens: %d %s", resp.StatusCode, b)
	}
	var c struct {
		InputTokens int `json:"input_tokens"`
	}
	strict(t, b, &c)
	return c.InputTokens
}

// a system prompt long enough to fill KV blocks, so that prefix caching
// shows
var messagesBody = fmt.Sprintf(`{"model":"llama","max_tokens":6,"system":[{"type":"text","text":%q}],`+
	`"messages":[{"role":"user","content":[{"type":"text","text":"What is a KV cache?"}]}]}`,
	strings.Repeat("You are a terse assistant who answers in one line. ", 8))

func TestMessages(t *testing.T) {
	p := startPod(t, nil)
	resp, b := post(t, p.url+"/v1/messages", messagesBody)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	var m anthropicMessage
	strict(t, b, &m)
	if !strings.HasPrefix(m.ID, "msg_") || m.Type != "message" || m.Role != "assistant" || m.Model != "llama" {
		t.Errorf("message %s", b)
	}
	if len(m.Content) != 1 || m.Content[0].Type != "text" || len(strings.Fields(m.Content[0].Text)) != 6 {
		t.Errorf("content %s", b)
	}
	if m.StopReason == nil || *m.StopReason != "max_tokens" || m.StopSequence != nil || !bytes.Contains(b, []byte(`"stop_sequence":null`)) {
		t.Errorf("stop reason and sequence %s", b)
	}
	if m.Usage == nil || m.Usage.OutputTokens != 6 || m.Usage.InputTokens != countTokens(t, p.url, messagesBody) {
		t.Errorf("usage %s, count_tokens %d", b, countTokens(t, p.url, messagesBody))
	}
	if keys := topLevelKeys(t, b); keys[len(keys)-1] != "usage" {
		t.Errorf("members %v: usage is not last", keys)
	}

	// The prompt is the chat template's rendering of the system prompt and
	// the messages, as a chat completion's: the same chat hits the blocks
	// the message left in the prefix cache, and counts the same tokens.
	chat := fmt.Sprintf(`{"model":"llama","max_tokens":1,"messages":[{"role":"system","content":%q},{"role":"user","content":"What is a KV cache?"}]}`,
		strings.Repeat("You are a terse assistant who answers in one line. ", 8))
	_, b = post(t, p.url+"/v1/chat/completions", chat)
	var c chatResponse
	strict(t, b, &c)
	if c.Usage.PromptTokens != m.Usage.InputTokens || c.Usage.PromptTokensDetails == nil || c.Usage.PromptTokensDetails.CachedTokens < m.Usage.InputTokens-16 {
		t.Errorf("chat after the message: usage %+v, want %d prompt tokens mostly cached", c.Usage, m.Usage.InputTokens)
	}

	// the same body answers the same text (seeded by the prompt)
	_, b = post(t, p.url+"/v1/messages", messagesBody)
	var again anthropicMessage
	strict(t, b, &again)
	if again.Content[0].Text != m.Content[0].Text || again.ID == m.ID {
		t.Errorf("repeat: %q (id %s), first %q (id %s)", again.Content[0].Text, again.ID, m.Content[0].Text, m.ID)
	}

	// vLLM's metrics count the messages as chat requests: 2 messages and
	// the chat, all stopped by max_tokens
	if got := successTotal(t, p.url, "length"); got != 3 {
		t.Errorf(`request_success_total{finished_reason="length"} = %v, want 3`, got)
	}
}

// successTotal reads vllm:request_success_total{finished_reason=reason}.
func successTotal(t *testing.T, url, reason string) float64 {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mfs["vllm:request_success_total"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "finished_reason" && l.GetValue() == reason {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// sseEvent is one server-sent event: its event line and data.
type sseEvent struct {
	name, data string
}

// readEvents reads an event stream of "event:" and "data:" lines.
func readEvents(t *testing.T, body io.Reader) []sseEvent {
	t.Helper()
	var out []sseEvent
	var cur sseEvent
	sc := bufio.NewScanner(body)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur != (sseEvent{}) {
				out = append(out, cur)
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, "event: "):
			cur.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			cur.data = strings.TrimPrefix(line, "data: ")
		default:
			t.Fatalf("not an SSE line: %q", line)
		}
	}
	if cur != (sseEvent{}) {
		t.Fatalf("stream ends inside an event: %+v", cur)
	}
	return out
}

func TestMessagesStream(t *testing.T) {
	p := startPod(t, nil)
	streamed := strings.Replace(messagesBody, `"max_tokens":6`, `"max_tokens":8,"stream":true`, 1)
	resp, err := http.Post(p.url+"/v1/messages", "application/json", strings.NewReader(streamed))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	events := readEvents(t, resp.Body)
	var names []string
	for _, e := range events {
		names = append(names, e.name)
		var typ struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal([]byte(e.data), &typ); err != nil || typ.Type != e.name {
			t.Errorf("event %s with data %s", e.name, e.data)
		}
	}
	deltas := len(events) - 5
	want := []string{"message_start", "content_block_start"}
	for range deltas {
		want = append(want, "content_block_delta")
	}
	want = append(want, "content_block_stop", "message_delta", "message_stop")
	if deltas < 1 || strings.Join(names, " ") != strings.Join(want, " ") {
		t.Fatalf("events %v", names)
	}

	var start struct {
		Type    string           `json:"type"`
		Message anthropicMessage `json:"message"`
	}
	strict(t, []byte(events[0].data), &start)
	sm := start.Message
	if !strings.HasPrefix(sm.ID, "msg_") || sm.Type != "message" || sm.Role != "assistant" || sm.Model != "llama" ||
		sm.Content == nil || len(sm.Content) != 0 || sm.StopReason != nil || sm.StopSequence != nil || sm.Usage == nil || sm.Usage.OutputTokens != 0 {
		t.Errorf("message_start %s", events[0].data)
	}
	if n := countTokens(t, p.url, streamed); sm.Usage.InputTokens != n {
		t.Errorf("message_start input_tokens %d, count_tokens %d", sm.Usage.InputTokens, n)
	}

	var blockStart struct {
		Type         string `json:"type"`
		Index        int    `json:"index"`
		ContentBlock struct {
			Type string  `json:"type"`
			Text *string `json:"text"`
		} `json:"content_block"`
	}
	strict(t, []byte(events[1].data), &blockStart)
	if blockStart.Index != 0 || blockStart.ContentBlock.Type != "text" || blockStart.ContentBlock.Text == nil || *blockStart.ContentBlock.Text != "" {
		t.Errorf("content_block_start %s", events[1].data)
	}
	var text strings.Builder
	for _, e := range events[2 : 2+deltas] {
		var d struct {
			Type  string `json:"type"`
			Index int    `json:"index"`
			Delta struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"delta"`
		}
		strict(t, []byte(e.data), &d)
		if d.Index != 0 || d.Delta.Type != "text_delta" || d.Delta.Text == "" {
			t.Errorf("content_block_delta %s", e.data)
		}
		text.WriteString(d.Delta.Text)
	}
	var stop struct {
		Type  string `json:"type"`
		Index int    `json:"index"`
	}
	strict(t, []byte(events[len(events)-3].data), &stop)

	var md struct {
		Type  string `json:"type"`
		Delta struct {
			StopReason   *string `json:"stop_reason"`
			StopSequence *string `json:"stop_sequence"`
		} `json:"delta"`
		Usage struct {
			OutputTokens int `json:"output_tokens"`
		} `json:"usage"`
	}
	strict(t, []byte(events[len(events)-2].data), &md)
	if md.Usage.OutputTokens != deltas || deltas != 8 || md.Delta.StopReason == nil || *md.Delta.StopReason != "max_tokens" ||
		!strings.Contains(events[len(events)-2].data, `"stop_sequence":null`) {
		t.Errorf("message_delta %s after %d deltas", events[len(events)-2].data, deltas)
	}
	if events[len(events)-1].data != `{"type":"message_stop"}` {
		t.Errorf("message_stop %s", events[len(events)-1].data)
	}

	// the stream's text is the answer's for the same body
	_, b := post(t, p.url+"/v1/messages", strings.Replace(streamed, `"stream":true`, `"stream":false`, 1))
	var m anthropicMessage
	strict(t, b, &m)
	if m.Content[0].Text != text.String() {
		t.Errorf("streamed %q, answered %q", text.String(), m.Content[0].Text)
	}
}

func TestMessagesErrors(t *testing.T) {
	p := startPod(t, func(c *Config) { c.Engine.MaxModelLen = 200 })
	user := `"messages":[{"role":"user","content":"hi"}]`
	cases := []struct {
		path, body string
		status     int
		typ, msg   string
	}{
		{"/v1/messages", `{"model":"llama",` + user + `}`, 400, "invalid_request_error", "max_tokens: required"},
		{"/v1/messages", `{"model":"nope","max_tokens":4,` + user + `}`, 404, "not_found_error", "The model `nope` does not exist."},
		{"/v1/messages", `{"model":"nope","max_tokens":4,"stream":true,` + user + `}`, 404, "not_found_error", "The model `nope` does not exist."},
		{"/v1/messages", `not json`, 400, "invalid_request_error", ""},
		{"/v1/messages", `{"model":"llama","max_tokens":0,` + user + `}`, 400, "invalid_request_error", "max_tokens must be at least 1"},
		{"/v1/messages", `{"model":"llama","max_tokens":4,"messages":[]}`, 400, "invalid_request_error", "messages"},
		{"/v1/messages", `{"model":"llama","max_tokens":500,` + user + `}`, 400, "invalid_request_error", "maximum context length is 200 tokens"},
		{"/v1/messages/count_tokens", `{"model":"nope",` + user + `}`, 404, "not_found_error", "The model `nope` does not exist."},
		{"/v1/messages/count_tokens", `{"model":"llama"}`, 400, "invalid_request_error", "messages: required"},
	}
	for _, c := range cases {
		resp, b := post(t, p.url+c.path, c.body)
		var e anthropicError
		strict(t, b, &e)
		if resp.StatusCode != c.status || resp.Header.Get("Content-Type") != "application/json" || e.Type != "error" || e.Error.Type != c.typ ||
			e.Error.Message == "" || !strings.Contains(e.Error.Message, c.msg) {
			t.Errorf("%s %s: %d %s", c.path, c.body, resp.StatusCode, b)
		}
	}

	// faults set through /sim/faults apply to messages, in Anthropic's shape
	for status, typ := range map[int]string{429: "rate_limit_error", 500: "api_error", 503: "overloaded_error"} {
		if s := put(t, p.url+"/sim/faults", fmt.Sprintf(`{"error_rates":{"%d":1}}`, status)); s != http.StatusOK {
			t.Fatalf("put faults: %d", s)
		}
		resp, b := post(t, p.url+"/v1/messages", `{"model":"llama","max_tokens":4,`+user+`}`)
		var e anthropicError
		strict(t, b, &e)
		if resp.StatusCode != status || e.Type != "error" || e.Error.Type != typ || !strings.Contains(e.Error.Message, "injected") {
			t.Errorf("fault %d: %d %s", status, resp.StatusCode, b)
		}
	}
}

func TestAPIKey(t *testing.T) {
	p := startPod(t, func(c *Config) { c.APIKey = "sk-sim" })
	// a body both APIs take
	message := `{"model":"llama","max_tokens":2,"messages":[{"role":"user","content":"hi"}]}`
	chat := message
	cases := []struct {
		path, body string
		header     http.Header
		status     int
	}{
		{"/v1/messages", message, http.Header{"X-Api-Key": {"sk-sim"}}, 200},
		{"/v1/messages", message, http.Header{"Authorization": {"Bearer sk-sim"}}, 200},
		{"/v1/messages/count_tokens", message, http.Header{"X-Api-Key": {"sk-sim"}}, 200},
		{"/v1/chat/completions", chat, http.Header{"X-Api-Key": {"sk-sim"}}, 200},
		{"/v1/chat/completions", chat, http.Header{"Authorization": {"Bearer sk-sim"}}, 200},
		{"/v1/messages", message, nil, 401},
		{"/v1/messages", message, http.Header{"X-Api-Key": {"sk-other"}}, 401},
		{"/v1/messages", message, http.Header{"X-Api-Key": {"Bearer sk-sim"}}, 401},
		{"/v1/messages", message, http.Header{"Authorization": {"sk-sim"}}, 401},
		{"/v1/messages/count_tokens", message, nil, 401},
		{"/v1/chat/completions", chat, http.Header{"X-Api-Key": {""}}, 401},
	}
	for _, c := range cases {
		req, err := http.NewRequest(http.MethodPost, p.url+c.path, strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range c.header {
			req.Header[k] = v
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status {
			t.Errorf("%s %v: %d %s", c.path, c.header, resp.StatusCode, b)
			continue
		}
		if c.status != http.StatusUnauthorized {
			continue
		}
		// refused in the shape of the API asked
		if strings.HasPrefix(c.path, "/v1/messages") {
			var e anthropicError
			strict(t, b, &e)
			if e.Type != "error" || e.Error.Type != "authentication_error" {
				t.Errorf("%s: %s", c.path, b)
			}
		} else {
			var e errorBody
			strict(t, b, &e)
			if e.Error.Code != http.StatusUnauthorized || e.Error.Type != "AuthenticationError" {
				t.Errorf("%s: %s", c.path, b)
			}
		}
	}
}

// vLLM's mapping of finish reasons to Anthropic's stop reasons.
func TestStopReason(t *testing.T) {
	for _, c := range []struct{ finish, want string }{
		{engine.FinishStop, "end_turn"},
		{engine.FinishLength, "max_tokens"},
	} {
		if got := stopReason(c.finish); got != c.want {
			t.Errorf("stopReason(%q) = %q, want %q", c.finish, got, c.want)
		}
	}
}
