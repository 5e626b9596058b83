package openai

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestParseTopLevel(t *testing.T) {
	cases := []struct {
		body string
		want Request
	}{
		{`{"model":"llama","prompt":"hi"}`, Request{Model: "llama", Prompt: "hi"}},
		{` {"stream": true, "model": "a\"b", "prompt": "x"} `, Request{Model: `a"b`, Stream: true, Prompt: "x"}},
		{`{"model":null,"stream":null,"prompt":"x"}`, Request{Prompt: "x"}},
		{`{"stream":true,"stream_options":{"include_usage":true,"x":[1,2]},"prompt":"x"}`, Request{Stream: true, HasStreamOptions: true, IncludeUsage: true, Prompt: "x"}},
		{`{"stream_options":null,"prompt":"x"}`, Request{HasStreamOptions: true, Prompt: "x"}},
		{`{"mod\u0065l":"escaped-key","prompt":"x"}`, Request{Model: "escaped-key", Prompt: "x"}},
		{`{"model":"a","model":"b","prompt":"x"}`, Request{Model: "b", Prompt: "x"}},
		{`{"Model":"case matters","prompt":"x"}`, Request{Prompt: "x"}},
		{`{"n":-1.5e+3,"t":[true,false,null,{}],"s":"\u00e9\n","prompt":"x"}`, Request{Prompt: "x"}},
		{`{"prompt":"x","max_tokens":7}`, Request{Prompt: "x", MaxTokens: 7}},
		{`{"prompt":"x","max_tokens":7,"max_completion_tokens":9}`, Request{Prompt: "x", MaxTokens: 9}},
		{`{"prompt":"x","max_tokens":7,"max_completion_tokens":null}`, Request{Prompt: "x", MaxTokens: 7}},
		{`{"prompt":"x","max_tokens":99999999999999999999999}`, Request{Prompt: "x", MaxTokens: 1<<31 - 1}},
		{`{"prompt":"bad utf8 ` + "\xff" + `"}`, Request{Prompt: "bad utf8 \uFFFD"}},
		{`{"prompt":"esc \ud83d\ude00 \n"}`, Request{Prompt: "esc \U0001F600 \n"}},
	}
	for _, c := range cases {
		c.want.API = APICompletions
		got, err := Parse(APICompletions, []byte(c.body))
		if err != nil || !equalRequests(got, c.want) {
			t.Errorf("Parse(%.60q) = %+v, %v; want %+v", c.body, got, err, c.want)
		}
	}
}

func equalRequests(a, b Request) bool {
	return a.API == b.API && a.Model == b.Model && a.Stream == b.Stream && a.HasStreamOptions == b.HasStreamOptions &&
		a.IncludeUsage == b.IncludeUsage && a.MaxTokens == b.MaxTokens && a.Prompt == b.Prompt &&
		slices.EqualFunc(a.Messages, b.Messages, func(x, y Message) bool { return sameText(x, y) && slices.Equal(x.Items, y.Items) }) &&
		slices.Equal(a.TokenIDs, b.TokenIDs)
}

// sameText compares messages but for their media items.
func sameText(a, b Message) bool {
	return a.Role == b.Role && a.Content == b.Content && a.Media == b.Media
}

func TestParsePrompt(t *testing.T) {
	cases := []struct {
		prompt string
		text   string
		ids    []uint32
	}{
		{`"hello"`, "hello", nil},
		{`["a","b"]`, "a\nb", nil},
		{`[1,2,30]`, "1 2 30", []uint32{1, 2, 30}},
		{`[ 4294967295 ]`, "4294967295", []uint32{4294967295}},
		{`[[1,2],[3]]`, "1 2\n3", nil},
		{`["a",[5]]`, "a\n5", nil},
		{`[]`, "", nil},
	}
	for _, c := range cases {
		got, err := Parse(APICompletions, []byte(`{"model":"m","prompt":`+c.prompt+`}`))
		if err != nil || got.Prompt != c.text || !slices.Equal(got.TokenIDs, c.ids) {
			t.Errorf("prompt %s: %q %v, %v; want %q %v", c.prompt, got.Prompt, got.TokenIDs, err, c.text, c.ids)
		}
	}
}

func TestParseChat(t *testing.T) {
	r, err := Parse(APIChatCompletions, []byte(`{
		"model": "llama",
		"prompt": 5,
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
	want := []Message{
		{Role: "system", Content: "be brief"},
		{Role: "user", Content: "what is this?", Media: MediaImage},
		{Role: "assistant"},
		{Role: "user", Media: MediaAudio | MediaVideo},
	}
	if !slices.EqualFunc(r.Messages, want, sameText) || r.Model != "llama" {
		t.Errorf("messages = %+v", r.Messages)
	}
	r, err = Parse(APIChatCompletions, []byte(`{"messages":[]}`))
	if err != nil || r.Messages == nil || len(r.Messages) != 0 {
		t.Errorf("empty messages: %#v %v", r.Messages, err)
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct {
		api         API
		body, param string
		msg         string // substring of the error
	}{
		{APICompletions, `[]`, "", "must be a JSON object"},
		{APICompletions, ``, "", "must be a JSON object"},
		{APICompletions, `not json`, "", "must be a JSON object"},
		{APICompletions, `{"model": 3, "prompt": "x"}`, "model", "model: must be a string"},
		{APICompletions, `{"stream": "yes", "prompt": "x"}`, "stream", "stream: must be a boolean"},
		{APICompletions, `{"stream_options": 1, "prompt": "x"}`, "stream_options", "must be an object"},
		{APICompletions, `{"stream_options": {"include_usage": 1}}`, "stream_options.include_usage", "must be a boolean"},
		{APICompletions, `{"prompt":"x","max_tokens":-1}`, "max_tokens", "must be a non-negative integer"},
		{APICompletions, `{"prompt":"x","max_completion_tokens":1.5}`, "max_completion_tokens", "must be a non-negative integer"},
		{APICompletions, `{"prompt":"x","max_tokens":"5"}`, "max_tokens", "must be a non-negative integer"},
		{APICompletions, `{"model":"a"} x`, "", "after the JSON object"},
		{APICompletions, `{"model":"a",}`, "", "not valid JSON"},
		{APICompletions, `{"a":01}`, "", "not valid JSON"},
		{APICompletions, `{"a":"\x"}`, "", "invalid escape"},
		{APICompletions, "{\"a\":\"\x01\"}", "", "control character"},
		{APICompletions, `{"a":[1,2}`, "", "not valid JSON"},
		{APICompletions, `{"a":tru}`, "", "invalid literal"},
		{APICompletions, `{"a":` + strings.Repeat("[", 300) + strings.Repeat("]", 300) + `}`, "", "nested too deeply"},
		{APICompletions, `{"model": "m"}`, "prompt", "prompt: required"},
		{APICompletions, `{"prompt": null}`, "prompt", "prompt: required"},
		{APICompletions, `{"prompt": {"a": 1}}`, "prompt", "must be a string or a list"},
		{APICompletions, `{"prompt": [1, -2]}`, "prompt", "must be a list of token ids"},
		{APICompletions, `{"prompt": [1, 4294967296]}`, "prompt", "must be a list of token ids"},
		{APICompletions, `{"prompt": [1, "a"]}`, "prompt", "must be a list of token ids"},
		{APICompletions, `{"prompt": ["a", 2]}`, "prompt[1]", "must be a string or a list of token ids"},
		{APICompletions, `{"prompt": ["a", [2.5]]}`, "prompt[1]", "must be a list of token ids"},
		{APIChatCompletions, `{"model": "m"}`, "messages", "messages: required"},
		{APIChatCompletions, `{"messages": "hi"}`, "messages", "must be a list of messages"},
		{APIChatCompletions, `{"messages": [1]}`, "messages[0]", "messages[0]: must be an object"},
		{APIChatCompletions, `{"messages": [{"role": 1}]}`, "messages[0].role", "must be a string"},
		{APIChatCompletions, `{"messages": [{"content": 5}]}`, "messages[0].content", "must be a string or a list of content parts"},
		{APIChatCompletions, `{"messages": [{"content": [7]}]}`, "messages[0].content[0]", "must be a content part object"},
		{APIChatCompletions, `{"messages": [{"content": [{"type": "text", "text": 3}]}]}`, "messages[0].content[0].text", "must be a string"},
		{APIChatCompletions, `{"messages": [{"content": [{"type": 3}]}]}`, "messages[0].content[0].type", "must be a string"},
		{0, `{}`, "", "unsupported API"},
	}
	for _, c := range cases {
		_, err := Parse(c.api, []byte(c.body))
		var be *BodyError
		if !errors.As(err, &be) {
			t.Errorf("%.60s: error %v is not a BodyError", c.body, err)
			continue
		}
		if be.Param != c.param || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%.60s: error %q (param %q), want %q (param %q)", c.body, err, be.Param, c.msg, c.param)
		}
		if strings.Contains(err.Error(), "json.") || strings.Contains(err.Error(), "Go value") {
			t.Errorf("%.60s: error %q names Go types", c.body, err)
		}
	}
}

func TestWithIncludeUsage(t *testing.T) {
	for _, body := range []string{
		`{"model":"m","stream":true,"prompt":"x"}`,
		` {"prompt":"x"} `,
		`{"stream":true,"stream_options":{"continuous_usage_stats":true},"prompt":"x"}`,
		`{"stream":true,"stream_options":{"include_usage":false},"prompt":"x"}`,
		`{"stream_options":null,"stream":true,"prompt":"x"}`,
	} {
		r, err := Parse(APICompletions, []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		out, err := WithIncludeUsage([]byte(body), r)
		if err != nil {
			t.Fatal(err)
		}
		r2, err := Parse(APICompletions, out)
		if err != nil || !r2.IncludeUsage || r2.Model != r.Model || r2.Stream != r.Stream {
			t.Errorf("%s -> %s: %+v %v", body, out, r2, err)
		}
		if strings.Contains(body, "continuous_usage_stats") && !strings.Contains(string(out), "continuous_usage_stats") {
			t.Errorf("other stream options lost: %s", out)
		}
	}
	body := []byte(`{"stream":true,"stream_options":{"include_usage":true},"prompt":"x"}`)
	r, _ := Parse(APICompletions, body)
	if out, _ := WithIncludeUsage(body, r); string(out) != string(body) {
		t.Error("body rewritten although include_usage was set")
	}
}

// reference decodes what Parse reads with encoding/json, members matched
// exactly.
type reference struct {
	model  string
	stream bool
	msgs   []Message
}

func referenceParse(body []byte) (reference, bool) {
	var top map[string]json.RawMessage
	if json.Unmarshal(body, &top) != nil || top == nil {
		return reference{}, false
	}
	var r reference
	_ = json.Unmarshal(top["model"], &r.model)
	_ = json.Unmarshal(top["stream"], &r.stream)
	var msgs []map[string]json.RawMessage
	_ = json.Unmarshal(top["messages"], &msgs)
	for _, m := range msgs {
		var out Message
		_ = json.Unmarshal(m["role"], &out.Role)
		if json.Unmarshal(m["content"], &out.Content) != nil {
			var parts []map[string]json.RawMessage
			_ = json.Unmarshal(m["content"], &parts)
			for _, p := range parts {
				var typ, text string
				_ = json.Unmarshal(p["type"], &typ)
				if k := mediaKindOf(typ); k != 0 {
					out.Media |= k
				} else if json.Unmarshal(p["text"], &text) == nil {
					out.Content += text
				}
			}
		}
		r.msgs = append(r.msgs, out)
	}
	return r, true
}

// FuzzParse holds Parse to encoding/json: it accepts only valid JSON, never
// calls valid JSON malformed, and reads what encoding/json reads.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{"model":"llama","prompt":"hi","stream":true}`,
		`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"x"},{"type":"image_url"}]}],"stream_options":{"include_usage":false}}`,
		`{"messages":[{"role":"a","content":"\ud83d\ude00 \u00e9"}],"max_tokens":5}`,
		`{"a":[1,-2.5e3,true,null,"\ud83d\ude00"]}`, `{}`, `[]`, `{"model":1}`, `{"x":"\u00"}`,
		`{"model":"m","max_tokens":8,"system":"s","messages":[{"role":"user","content":[{"type":"tool_result","content":[{"type":"text","text":"r"}]},{"type":"tool_use","input":{"a":[1]}}]}]}`,
		`{"token_ids":[1,2,3],"sampling_params":{"max_tokens":4,"stop":[]},"stream":true}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := Parse(APIChatCompletions, body)
		ref, valid := referenceParse(body)
		if err == nil && !valid {
			t.Fatalf("accepted invalid JSON %q", body)
		}
		var be *BodyError
		if err != nil && !errors.As(err, &be) {
			t.Fatalf("error %v is not a BodyError", err)
		}
		if valid && err != nil && be.Param == "" && json.Valid(body) {
			t.Fatalf("valid JSON %q called malformed: %v", body, err)
		}
		if err != nil {
			return
		}
		if r.Model != ref.model || r.Stream != ref.stream || !slices.EqualFunc(r.Messages, ref.msgs, sameText) {
			t.Fatalf("%q: parsed %+v, encoding/json reads %+v", body, r, ref)
		}
		for _, api := range []API{APICompletions, APIMessages, APIGenerate, APIPassthrough} {
			if _, err := Parse(api, body); err != nil && !errors.As(err, &be) {
				t.Fatalf("%s: %v", api, err)
			}
		}
	})
}

// What the gateway and ext_proc send parsed reads back as they parsed it.
func TestProtoRoundTrip(t *testing.T) {
	for api, body := range map[API]string{
		APIChatCompletions: `{"model":"m","stream":true,"max_tokens":9,"messages":[{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image_url"},{"type":"video"}]},{"role":"assistant","content":"yo"}]}`,
		APICompletions:     `{"model":"m","prompt":[1,2,3]}`,
	} {
		r, err := Parse(api, []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		p := r.Proto()
		back := FromProto(api, p)
		r.HasStreamOptions, r.IncludeUsage = false, false
		if !equalRequests(back, r) {
			t.Errorf("%v: %+v came back as %+v", api, r, back)
		}
		if got, ok := APIOfPick(api.PickAPI()); !ok || got != api {
			t.Errorf("api %v: %v", api, got)
		}
	}
}

// Each media part hashes what it says: the same image sent again (in
// another message, another request, with other text around it) hashes
// alike, another image otherwise; the proto carries the items.
func TestMediaItems(t *testing.T) {
	parse := func(body string) Request {
		t.Helper()
		r, err := Parse(APIChatCompletions, []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	cat := `{"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}`
	dog := `{"type": "image_url", "image_url": {"url": "https://example.com/dog.png"}}`
	a := parse(`{"messages": [{"role": "user", "content": [{"type": "text", "text": "what is this?"}, ` + cat + `, ` + dog + `]}]}`)
	b := parse(`{"messages": [{"role": "system", "content": "x"}, {"role": "user", "content": [` + cat + `, {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}}]}]}`)
	items := a.Messages[0].Items
	if len(items) != 2 || items[0].Kind != MediaImage || items[0].Hash == items[1].Hash {
		t.Fatalf("items %+v, want two images with different hashes", items)
	}
	other := b.Messages[1].Items
	if len(other) != 2 || other[0] != items[0] || other[1].Kind != MediaAudio {
		t.Errorf("the cat again: %+v, want %+v first, then audio", other, items[0])
	}
	if back := FromProto(APIChatCompletions, b.Proto()); !slices.Equal(back.Messages[1].Items, other) {
		t.Errorf("through the proto: %+v, want %+v", back.Messages[1].Items, other)
	}
	// The hashed items are bounded per request.
	var sb strings.Builder
	sb.WriteString(`{"messages": [{"role": "user", "content": [`)
	for i := range MaxMediaItems + 10 {
		if i > 0 {
			sb.WriteString(",")
		}
		fmt.Fprintf(&sb, `{"type": "image_url", "image_url": {"url": "https://example.com/%d.png"}}`, i)
	}
	sb.WriteString(`]}]}`)
	if r := parse(sb.String()); len(r.Messages[0].Items) != MaxMediaItems || r.Messages[0].Media != MediaImage {
		t.Errorf("%d items hashed of %d parts, want %d", len(r.Messages[0].Items), MaxMediaItems+10, MaxMediaItems)
	}
}
