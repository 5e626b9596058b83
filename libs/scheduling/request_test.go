package scheduling

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/hermod/hermod/libs/openai"
)

// A parsed chat request's media and prompt length.
func TestRequestOfAChatBody(t *testing.T) {
	body, err := openai.Parse(openai.APIChatCompletions, []byte(`{"model":"llama","messages":[
		{"role":"system","content":"be brief"},
		{"role":"user","content":[{"type":"text","text":"what is "},{"type":"image_url"},{"type":"text","text":"this?"}]},
		{"role":"user","content":[{"type":"input_audio"},{"type":"video_url"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	req := NewRequest("r1", body, nil)
	if req.Model != "llama" || req.Media() != openai.MediaImage|openai.MediaAudio|openai.MediaVideo {
		t.Errorf("model %q media %v", req.Model, req.Media())
	}
	if got := req.PromptChars(); got != len("be brief")+len("what is this?") {
		t.Errorf("prompt chars = %d", got)
	}
	body, _ = openai.Parse(openai.APICompletions, []byte(`{"prompt":[5,6]}`))
	if req := NewRequest("r2", body, nil); len(req.TokenIDs) != 2 || req.EstimatedTokens(0.25) != 2 {
		t.Errorf("token ids %v", req.TokenIDs)
	}
}

func TestPrefixTextIsTheJSONOfTheMessages(t *testing.T) {
	req := &Request{Body: openai.Request{API: openai.APIChatCompletions, Messages: []openai.Message{
		{Role: "system", Content: "quote \" backslash \\ tab\t newline\n ctl\x01 <html> & é 中 \u2028"},
		{Role: "user", Content: "bad utf8 \xff\xfe end"},
	}}}
	want := marshalMessages(t, req.Body.Messages)
	if got := req.PrefixText(); !bytes.Equal(got, want) {
		t.Errorf("prefix text\n got  %s\n want %s", got, want)
	}
	first, second := req.PrefixText(), req.PrefixText()
	if &first[0] != &second[0] {
		t.Error("prefix text is recomputed on every call")
	}
	comp := &Request{Body: openai.Request{API: openai.APICompletions, Prompt: "plain"}}
	if string(comp.PrefixText()) != "plain" {
		t.Errorf("completions prefix text = %q", comp.PrefixText())
	}
}

func marshalMessages(t testing.TB, ms []openai.Message) []byte {
	t.Helper()
	type wire struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}
	w := make([]wire, len(ms))
	for i, m := range ms {
		w[i] = wire{m.Role, m.Content}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(w); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

func TestEstimatedTokens(t *testing.T) {
	r := &Request{Body: openai.Request{API: openai.APICompletions, Prompt: strings.Repeat("é", 400)}}
	if got := r.EstimatedTokens(0.25); got != 100 {
		t.Errorf("estimate from 400 characters = %v, want 100 (characters, not bytes)", got)
	}
	r.TokenIDs = make([]uint32, 37)
	if got := r.EstimatedTokens(0.25); got != 37 {
		t.Errorf("estimate with token ids = %v, want 37", got)
	}
}

// FuzzRequestText: a parsed chat request's prefix text is the JSON
// encoding of its messages.
func FuzzRequestText(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","prompt":"hello"}`,
		`{"model":"m","prompt":["a",[1,2]]}`,
		`{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
		`{"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url"}]}]}`,
		`{"messages":[{"content":null}]}`,
	} {
		f.Add(uint8(1), []byte(s))
		f.Add(uint8(2), []byte(s))
	}
	f.Fuzz(func(t *testing.T, api uint8, raw []byte) {
		a := openai.API(api%2 + 1)
		body, err := openai.Parse(a, raw)
		if err != nil {
			return
		}
		req := NewRequest("r", body, nil)
		if a == openai.APIChatCompletions {
			got := req.PrefixText()
			if !json.Valid(got) {
				t.Fatalf("prefix text is not JSON: %q", got)
			}
			if want := marshalMessages(t, req.Body.Messages); !bytes.Equal(got, want) {
				t.Fatalf("prefix text\n got  %q\n want %q", got, want)
			}
		}
		_ = req.PromptChars()
		_ = req.Media()
	})
}
