package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestResponsesConversation: a three-turn conversation through the
// gateway's /v1/responses with previous_response_id, non-streaming and
// streaming turns, stored by the responses service the stack runs.
func TestResponsesConversation(t *testing.T) {
	s := startStack(t, "--pods", "2")
	base := s.url("/v1/responses")
	model := s.state.Model

	post := func(body string) map[string]any {
		t.Helper()
		resp, err := http.Post(base, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("POST %s: %d %s", body, resp.StatusCode, b)
		}
		var r map[string]any
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	stream := func(body string) map[string]any {
		t.Helper()
		resp, err := http.Post(base, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			b, _ := io.ReadAll(resp.Body)
			t.Fatalf("stream: %d %s", resp.StatusCode, b)
		}
		var completed map[string]any
		var deltas strings.Builder
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			d, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var ev map[string]any
			if err := json.Unmarshal([]byte(d), &ev); err != nil {
				t.Fatalf("event %s: %v", d, err)
			}
			switch ev["type"] {
			case "response.output_text.delta":
				deltas.WriteString(ev["delta"].(string))
			case "response.completed", "response.incomplete":
				completed = ev["response"].(map[string]any)
			}
		}
		if completed == nil {
			t.Fatal("no response.completed (or incomplete) event")
		}
		if text := outputText(t, completed); text != deltas.String() {
			t.Fatalf("completed text %q, deltas %q", text, deltas.String())
		}
		return completed
	}

	r1 := post(fmt.Sprintf(`{"model":%q,"input":"Tell me about the blue whale, the largest animal that has ever lived.","instructions":"You are a marine biologist.","max_output_tokens":24}`, model))
	validateResponse(t, r1, model)
	r2 := stream(fmt.Sprintf(`{"model":%q,"input":[{"role":"user","content":[{"type":"input_text","text":"And how long does it live in the wild?"}]}],"previous_response_id":%q,"stream":true,"max_output_tokens":24}`, model, r1["id"]))
	validateResponse(t, r2, model)
	r3 := post(fmt.Sprintf(`{"model":%q,"input":"Summarise both answers.","previous_response_id":%q,"max_output_tokens":24}`, model, r2["id"]))
	validateResponse(t, r3, model)
	if r3["previous_response_id"] != r2["id"] || r2["previous_response_id"] != r1["id"] {
		t.Fatal("previous_response_id not echoed")
	}
	// the third turn's prompt holds the first two turns: its input tokens
	// exceed the second turn's prompt and answer together
	in := func(r map[string]any) float64 { return r["usage"].(map[string]any)["input_tokens"].(float64) }
	out := func(r map[string]any) float64 { return r["usage"].(map[string]any)["output_tokens"].(float64) }
	if !(in(r2) > in(r1)+out(r1) && in(r3) > in(r2)+out(r2)) {
		t.Fatalf("input tokens %v, %v, %v (outputs %v, %v): later turns do not carry the conversation", in(r1), in(r2), in(r3), out(r1), out(r2))
	}

	// GET returns the stored object; input_items lists the turn's input
	resp, err := http.Get(base + "/" + r2["id"].(string))
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&got)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || got["id"] != r2["id"] || outputText(t, got) != outputText(t, r2) {
		t.Fatalf("GET: %d %v", resp.StatusCode, got)
	}
	resp, err = http.Get(base + "/" + r3["id"].(string) + "/input_items")
	if err != nil {
		t.Fatal(err)
	}
	var items map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&items)
	resp.Body.Close()
	data, _ := items["data"].([]any)
	if items["object"] != "list" || len(data) != 1 || data[0].(map[string]any)["content"].([]any)[0].(map[string]any)["text"] != "Summarise both answers." {
		t.Fatalf("input items %v", items)
	}
	// unknown previous response: 404 in the OpenAI error shape
	resp, err = http.Post(base, "application/json", strings.NewReader(fmt.Sprintf(`{"model":%q,"input":"x","previous_response_id":"resp_unknown"}`, model)))
	if err != nil {
		t.Fatal(err)
	}
	var e struct {
		Error struct {
			Type, Message string
			Param         *string
		}
	}
	_ = json.NewDecoder(resp.Body).Decode(&e)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || e.Error.Type != "invalid_request_error" || e.Error.Param == nil || *e.Error.Param != "previous_response_id" {
		t.Fatalf("unknown previous: %d %+v", resp.StatusCode, e)
	}
	// DELETE, then the conversation cannot continue from it
	req, _ := http.NewRequest(http.MethodDelete, base+"/"+r1["id"].(string), nil)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("delete: %d", resp.StatusCode)
	}
	resp, _ = http.Post(base, "application/json", strings.NewReader(fmt.Sprintf(`{"model":%q,"input":"x","previous_response_id":%q}`, model, r3["id"])))
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("continuing a conversation whose first turn was deleted: %d", resp.StatusCode)
	}
}

func outputText(t *testing.T, r map[string]any) string {
	t.Helper()
	var b strings.Builder
	for _, o := range r["output"].([]any) {
		for _, c := range o.(map[string]any)["content"].([]any) {
			b.WriteString(c.(map[string]any)["text"].(string))
		}
	}
	return b.String()
}

// validateResponse checks the OpenAI Response object's shape: its
// required fields and their types.
func validateResponse(t *testing.T, r map[string]any, model string) {
	t.Helper()
	str := func(k string) string {
		v, ok := r[k].(string)
		if !ok {
			t.Fatalf("%s: not a string in %v", k, r)
		}
		return v
	}
	if id := str("id"); !strings.HasPrefix(id, "resp_") {
		t.Fatalf("id %q", id)
	}
	if str("object") != "response" || str("model") != model {
		t.Fatalf("object/model: %v", r)
	}
	if st := str("status"); st != "completed" && st != "incomplete" {
		t.Fatalf("status %q", st)
	}
	if _, ok := r["created_at"].(float64); !ok {
		t.Fatal("created_at not a number")
	}
	for _, k := range []string{"error", "incomplete_details", "instructions", "max_output_tokens", "previous_response_id", "temperature", "top_p", "user"} {
		if _, ok := r[k]; !ok {
			t.Fatalf("%s missing (must be present, null if unset)", k)
		}
	}
	if _, ok := r["parallel_tool_calls"].(bool); !ok {
		t.Fatal("parallel_tool_calls")
	}
	if _, ok := r["tools"].([]any); !ok {
		t.Fatal("tools")
	}
	if _, ok := r["metadata"].(map[string]any); !ok {
		t.Fatal("metadata")
	}
	out, ok := r["output"].([]any)
	if !ok || len(out) != 1 {
		t.Fatalf("output %v", r["output"])
	}
	msg := out[0].(map[string]any)
	if msg["type"] != "message" || msg["role"] != "assistant" || !strings.HasPrefix(msg["id"].(string), "msg_") {
		t.Fatalf("output item %v", msg)
	}
	part := msg["content"].([]any)[0].(map[string]any)
	if part["type"] != "output_text" || part["text"] == "" {
		t.Fatalf("content %v", part)
	}
	if _, ok := part["annotations"].([]any); !ok {
		t.Fatal("annotations")
	}
	u := r["usage"].(map[string]any)
	for _, k := range []string{"input_tokens", "output_tokens", "total_tokens"} {
		if _, ok := u[k].(float64); !ok {
			t.Fatalf("usage.%s", k)
		}
	}
	if u["total_tokens"].(float64) != u["input_tokens"].(float64)+u["output_tokens"].(float64) {
		t.Fatalf("usage %v", u)
	}
	if _, ok := u["input_tokens_details"].(map[string]any)["cached_tokens"].(float64); !ok {
		t.Fatal("usage.input_tokens_details.cached_tokens")
	}
	if _, ok := u["output_tokens_details"].(map[string]any)["reasoning_tokens"].(float64); !ok {
		t.Fatal("usage.output_tokens_details.reasoning_tokens")
	}
}
