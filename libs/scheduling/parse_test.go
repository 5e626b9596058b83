package scheduling

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestParseRequestCompletions(t *testing.T) {
	cases := []struct {
		body   string
		prompt string
		ids    []uint32
	}{
		{`{"model":"m","prompt":"hello"}`, "hello", nil},
		{`{"model":"m","prompt":["a","b"]}`, "a\nb", nil},
		{`{"model":"m","prompt":[1,2,30]}`, "1 2 30", []uint32{1, 2, 30}},
		{`{"model":"m","prompt":[[1,2],[3]]}`, "1 2\n3", nil},
		{`{"model":"m","prompt":"x","max_tokens":5,"stream":true,"unknown":{"a":[1]}}`, "x", nil},
	}
	for _, c := range cases {
		req, err := ParseRequest(APICompletions, []byte(c.body))
		if err != nil {
			t.Fatalf("%s: %v", c.body, err)
		}
		if req.Model != "m" || req.Body.API != APICompletions || req.Body.Prompt != c.prompt || !slices.Equal(req.TokenIDs, c.ids) {
			t.Errorf("%s: got %+v", c.body, req)
		}
	}
}

func TestParseRequestChat(t *testing.T) {
	req, err := ParseRequest(APIChatCompletions, []byte(`{
		"model": "llama",
		"messages": [
			{"role": "system", "content": "be brief"},
			{"role": "user", "content": [
				{"type": "text", "text": "what is "},
				{"type": "image_url", "image_url": {"url": "data:..."}},
				{"type": "text", "text": "this?"}
			]},
			{"role": "assistant", "content": null, "tool_calls": []},
			{"role": "user", "content": [{"type": "input_audio", "input_audio": {}}, {"type": "video_url"}]}
		]}`))
	if err != nil {
		t.Fatal(err)
	}
	m := req.Body.Messages
	if len(m) != 4 || m[0].Content != "be brief" || m[1].Content != "what is this?" || m[2].Content != "" {
		t.Fatalf("messages = %+v", m)
	}
	if m[0].Media != 0 || m[1].Media != MediaImage || m[3].Media != MediaAudio|MediaVideo {
		t.Errorf("media = %v %v %v", m[0].Media, m[1].Media, m[3].Media)
	}
	if req.Media() != MediaImage|MediaAudio|MediaVideo {
		t.Errorf("request media = %v", req.Media())
	}
	if got := req.PromptChars(); got != len("be brief")+len("what is this?") {
		t.Errorf("prompt chars = %d", got)
	}
}

func TestParseRequestErrors(t *testing.T) {
	cases := []struct {
		api       API
		body, msg string
	}{
		{APICompletions, `not json`, "request body is not a JSON object"},
		{APICompletions, `[1]`, "request body is not a JSON object"},
		{APICompletions, `{"model": 3, "prompt": "x"}`, "model: must be a string"},
		{APICompletions, `{"model": "m"}`, "prompt: required"},
		{APICompletions, `{"prompt": {"a": 1}}`, "prompt: must be a string or a list"},
		{APICompletions, `{"prompt": [1, -2]}`, "prompt: must be a list of token ids"},
		{APICompletions, `{"prompt": ["a", 2]}`, "prompt[1]: must be a string or a list of token ids"},
		{APIChatCompletions, `{"model": "m"}`, "messages: required"},
		{APIChatCompletions, `{"messages": "hi"}`, "request body is not a JSON object"},
		{APIChatCompletions, `{"messages": [1]}`, "messages[0].must be an object"},
		{APIChatCompletions, `{"messages": [{"role": 1}]}`, "messages[0].role: must be a string"},
		{APIChatCompletions, `{"messages": [{"content": 5}]}`, "messages[0].content: must be a string or a list of content parts"},
		{APIChatCompletions, `{"messages": [{"content": [{"type": "text", "text": 3}]}]}`, "messages[0].content[0].text: must be a string"},
	}
	for _, c := range cases {
		_, err := ParseRequest(c.api, []byte(c.body))
		if err == nil {
			t.Errorf("%s: no error", c.body)
			continue
		}
		if !errors.Is(err, ErrBadRequest) {
			t.Errorf("%s: %v is not a bad request", c.body, err)
		}
		if !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: %q does not contain %q", c.body, err, c.msg)
		}
	}
}

func TestPrefixTextIsTheJSONOfTheMessages(t *testing.T) {
	req := &Request{Body: Body{API: APIChatCompletions, Messages: []Message{
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
	comp := &Request{Body: Body{API: APICompletions, Prompt: "plain"}}
	if string(comp.PrefixText()) != "plain" {
		t.Errorf("completions prefix text = %q", comp.PrefixText())
	}
}

func marshalMessages(t testing.TB, ms []Message) []byte {
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
	r := &Request{Body: Body{API: APICompletions, Prompt: strings.Repeat("é", 400)}}
	if got := r.EstimatedTokens(0.25); got != 100 {
		t.Errorf("estimate from 400 characters = %v, want 100 (characters, not bytes)", got)
	}
	r.TokenIDs = make([]uint32, 37)
	if got := r.EstimatedTokens(0.25); got != 37 {
		t.Errorf("estimate with token ids = %v, want 37", got)
	}
}

// FuzzParseRequest: any body either parses or is a bad request; a parsed
// chat request's prefix text is the JSON encoding of its messages.
func FuzzParseRequest(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","prompt":"hello"}`,
		`{"model":"m","prompt":[1,2,3]}`,
		`{"model":"m","prompt":["a",[1,2]]}`,
		`{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
		`{"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url"}]}]}`,
		`{"messages":[{"content":null}]}`,
		`{}`, `[]`, `null`, `{"prompt": 1}`,
	} {
		f.Add(uint8(1), []byte(s))
		f.Add(uint8(2), []byte(s))
	}
	f.Fuzz(func(t *testing.T, api uint8, body []byte) {
		a := API(api%2 + 1)
		req, err := ParseRequest(a, body)
		if err != nil {
			if !errors.Is(err, ErrBadRequest) {
				t.Fatalf("error %v is not a bad request", err)
			}
			return
		}
		if a == APIChatCompletions {
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

// FuzzParseConfig: ParseConfig never panics, and what it accepts has only
// JSON parameters.
func FuzzParseConfig(f *testing.F) {
	for _, s := range []string{
		minimal,
		"config:\n  plugins: [{type: a}]\n",
		"config: |\n  plugins: [{type: a}]\n",
		"plugins:\n- type: a\n  parameters: &x {a: [1, 2.5, true, null, 0x10]}\n- type: b\n  parameters: {<<: *x, b: *x}\n",
		"schedulingProfiles: [{name: a, plugins: [{pluginRef: b, weight: 2}]}]\n",
		"data: {sources: [{pluginRef: s, extractors: [{pluginRef: e}]}]}\n",
		"featureGates: [prepareDataPlugins]\nsaturationDetector: {a: 1}\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := ParseConfig(data)
		if err != nil {
			return
		}
		for _, p := range cfg.Plugins {
			if p.Parameters != nil && !json.Valid(p.Parameters) {
				t.Fatalf("parameters of %s are not JSON: %q", p.Type, p.Parameters)
			}
		}
	})
}
