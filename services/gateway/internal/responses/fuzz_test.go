package responses

import (
	"encoding/json"
	"testing"
)

// A create request's body, as readCreate decodes it: whatever the bytes,
// the input is a list of well-formed messages or an error, and the
// conversation an id or an error.
func FuzzResponsesRequest(f *testing.F) {
	f.Add([]byte(`{"model":"m","input":"hello"}`))
	f.Add([]byte(`{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"a"},{"type":"output_text","text":"b"}]}],"conversation":{"id":"conv_1"}}`))
	f.Add([]byte(`{"model":"m","input":[{"type":"message","role":"assistant","content":"x"}],"conversation":"conv_2"}`))
	f.Add([]byte(`{"input":[{"role":"robot","content":"x"}],"conversation":7}`))
	f.Add([]byte(`{"input":[],"conversation":{"id":""}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var req Request
		if json.Unmarshal(body, &req) != nil {
			return
		}
		if items, err := parseInput(req.Input); err == nil {
			checkItems(t, items)
		}
		if id, err := conversationOf(req.Conversation); err == nil && len(req.Conversation) > 0 && string(req.Conversation) != "null" && id == "" {
			t.Fatalf("conversation %s decoded as no id", req.Conversation)
		}
	})
}

// A conversation's items and metadata, as create and add decode them.
func FuzzConversationBody(f *testing.F) {
	f.Add([]byte(`{"items":[{"role":"user","content":"hello"}],"metadata":{"topic":"demo"}}`), true)
	f.Add([]byte(`{"items":[]}`), false)
	f.Add([]byte(`{"items":"x","metadata":{"k":""}}`), true)
	f.Fuzz(func(t *testing.T, body []byte, optional bool) {
		var b struct {
			Items    json.RawMessage   `json:"items"`
			Metadata map[string]string `json:"metadata"`
		}
		if json.Unmarshal(body, &b) != nil {
			return
		}
		_ = checkMetadata(b.Metadata)
		items, err := parseItems(b.Items, optional)
		if err != nil {
			return
		}
		if len(items) > maxItemsPerAdd || (!optional && len(items) == 0) {
			t.Fatalf("%d items accepted (optional %v)", len(items), optional)
		}
		checkItems(t, items)
	})
}

func checkItems(t *testing.T, items []InputItem) {
	t.Helper()
	for _, it := range items {
		switch {
		case it.ID == "" || it.Type != "message" || len(it.Content) != 1:
			t.Fatalf("malformed item %+v", it)
		case it.Role != "user" && it.Role != "system" && it.Role != "developer" && it.Role != "assistant":
			t.Fatalf("item with role %q", it.Role)
		}
	}
}
