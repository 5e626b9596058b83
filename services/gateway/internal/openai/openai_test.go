package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestInspect(t *testing.T) {
	cases := []struct {
		body string
		want Request
		err  string // substring; "" = no error
	}{
		{`{"model":"llama","prompt":"hi"}`, Request{Model: "llama"}, ""},
		{` {"stream": true, "model": "a\"b", "messages": [{"role":"user","content":"x"}]} `, Request{Model: `a"b`, Stream: true}, ""},
		{`{"model":null,"stream":null}`, Request{}, ""},
		{`{"stream":true,"stream_options":{"include_usage":true,"x":[1,2]}}`, Request{Stream: true, HasStreamOptions: true, IncludeUsage: true}, ""},
		{`{"stream_options":null}`, Request{HasStreamOptions: true}, ""},
		{`{"mod\u0065l":"escaped-key"}`, Request{Model: "escaped-key"}, ""},
		{`{"model":"a","model":"b"}`, Request{Model: "b"}, ""},
		{`{"n":-1.5e+3,"t":[true,false,null,{}],"s":"\u00e9\n"}`, Request{}, ""},
		{`[]`, Request{}, "must be a JSON object"},
		{``, Request{}, "must be a JSON object"},
		{`{"model": 3}`, Request{}, "model: must be a string"},
		{`{"stream": "yes"}`, Request{}, "stream: must be a boolean"},
		{`{"stream_options": 1}`, Request{}, "stream_options: must be an object"},
		{`{"stream_options": {"include_usage": 1}}`, Request{}, "stream_options.include_usage: must be a boolean"},
		{`{"model":"a"} x`, Request{}, "after the JSON object"},
		{`{"model":"a",}`, Request{}, "not valid JSON"},
		{`{"a":01}`, Request{}, "not valid JSON"},
		{`{"a":"\x"}`, Request{}, "invalid escape"},
		{"{\"a\":\"\x01\"}", Request{}, "control character"},
		{`{"a":[1,2}`, Request{}, "not valid JSON"},
		{`{"a":tru}`, Request{}, "invalid literal"},
		{strings.Repeat("[", 300), Request{}, "must be a JSON object"},
		{`{"a":` + strings.Repeat("[", 300) + strings.Repeat("]", 300) + `}`, Request{}, "nested too deeply"},
	}
	for _, c := range cases {
		got, err := Inspect([]byte(c.body))
		if c.err == "" {
			if err != nil || got != c.want {
				t.Errorf("Inspect(%.40q) = %+v, %v; want %+v", c.body, got, err, c.want)
			}
			continue
		}
		var be *BodyError
		if err == nil || !errors.As(err, &be) || !strings.Contains(err.Error(), c.err) {
			t.Errorf("Inspect(%.40q) error = %v, want %q", c.body, err, c.err)
		}
	}
}

func TestWithIncludeUsage(t *testing.T) {
	for _, body := range []string{
		`{"model":"m","stream":true}`,
		` { } `,
		`{"stream":true,"stream_options":{"continuous_usage_stats":true}}`,
		`{"stream":true,"stream_options":{"include_usage":false}}`,
		`{"stream_options":null,"stream":true}`,
	} {
		r, err := Inspect([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		out, err := WithIncludeUsage([]byte(body), r)
		if err != nil {
			t.Fatal(err)
		}
		r2, err := Inspect(out)
		if err != nil || !r2.IncludeUsage || r2.Model != r.Model || r2.Stream != r.Stream {
			t.Errorf("%s -> %s: %+v %v", body, out, r2, err)
		}
		var m map[string]any
		if err := json.Unmarshal(out, &m); err != nil {
			t.Errorf("%s -> invalid JSON %s", body, out)
		}
		if strings.Contains(body, "continuous_usage_stats") && !strings.Contains(string(out), "continuous_usage_stats") {
			t.Errorf("other stream options lost: %s", out)
		}
	}
	body := []byte(`{"stream":true,"stream_options":{"include_usage":true}}`)
	r, _ := Inspect(body)
	if out, _ := WithIncludeUsage(body, r); string(out) != string(body) {
		t.Error("body rewritten although include_usage was set")
	}
}

func TestUsage(t *testing.T) {
	u, ok := ResponseUsage([]byte(`{"id":"x","choices":[{"text":"usage"}],"usage":{"prompt_tokens":12,"completion_tokens":5,"total_tokens":17,"prompt_tokens_details":{"cached_tokens":8}}}`))
	if !ok || u.PromptTokens != 12 || u.CompletionTokens != 5 || u.CachedTokens() != 8 {
		t.Errorf("response usage %+v %v", u, ok)
	}
	if _, ok := ResponseUsage([]byte(`{"choices":[],"usage":null}`)); ok {
		t.Error("null usage read")
	}
	u, only, ok := ChunkUsage([]byte(`{"id":"c","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}`))
	if !ok || !only || u.CompletionTokens != 4 || u.CachedTokens() != 0 {
		t.Errorf("final chunk %+v %v %v", u, only, ok)
	}
	if _, only, ok := ChunkUsage([]byte(`{"choices":[{"delta":{"content":"hi"}}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`)); !ok || only {
		t.Error("continuous usage chunk taken as usage-only")
	}
	if _, _, ok := ChunkUsage([]byte(`{"choices":[{"delta":{"content":"\"usage\": {"}}]}`)); ok {
		t.Error("usage read from content")
	}
}

func TestWriteError(t *testing.T) {
	w := httptest.NewRecorder()
	WriteError(w, 429, TypeRateLimit, "", "", "slow down", 2)
	if w.Code != 429 || w.Header().Get("Retry-After") != "2" || w.Header().Get("Content-Type") != "application/json" {
		t.Errorf("status %d headers %v", w.Code, w.Header())
	}
	var b struct {
		Error struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Param   *string `json:"param"`
			Code    int     `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &b); err != nil || b.Error.Message != "slow down" || b.Error.Type != "rate_limit_error" || b.Error.Param != nil || b.Error.Code != 429 {
		t.Errorf("body %s", w.Body.String())
	}
	w = httptest.NewRecorder()
	WriteError(w, 404, TypeNotFound, "model_not_found", "model", "no such model", 0)
	if !strings.Contains(w.Body.String(), `"param":"model"`) || !strings.Contains(w.Body.String(), `"code":"model_not_found"`) {
		t.Errorf("body %s", w.Body.String())
	}
}

// FuzzInspect holds Inspect to encoding/json: it accepts exactly the
// documents json.Valid accepts whose top level is an object with
// well-typed fields, and reads the same model and stream.
func FuzzInspect(f *testing.F) {
	for _, s := range []string{
		`{"model":"llama","prompt":"hi","stream":true}`,
		`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"x"}]}],"stream_options":{"include_usage":false}}`,
		`{"a":[1,-2.5e3,true,null,"\ud83d\ude00"]}`, `{}`, `[]`, `{"model":1}`, `{"x":"\u00"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := Inspect(body)
		valid := json.Valid(body)
		if err == nil && !valid {
			t.Fatalf("Inspect accepted invalid JSON %q", body)
		}
		// The reference reads members by exact name, as vLLM does (Go's
		// struct decoding would also match "Stream" or "streAm").
		var top map[string]json.RawMessage
		stdErr := json.Unmarshal(body, &top)
		if stdErr == nil && top == nil {
			stdErr = errors.New("null")
		}
		if err != nil {
			var be *BodyError
			if !errors.As(err, &be) {
				t.Fatalf("error of another type: %v", err)
			}
			// A structurally valid object must only be refused for a
			// field's type (or nesting depth).
			if valid && stdErr == nil && be.Param == "" && !strings.Contains(be.Msg, "nested too deeply") {
				t.Fatalf("Inspect refused %q: %v", body, err)
			}
			return
		}
		if stdErr != nil {
			t.Fatalf("json refused what Inspect accepted: %q: %v", body, stdErr)
		}
		var model string
		if raw, ok := top["model"]; ok && string(raw) != "null" {
			if json.Unmarshal(raw, &model) != nil {
				t.Fatalf("Inspect accepted a non-string model: %q", body)
			}
		}
		if model != r.Model {
			t.Fatalf("model %q vs %q", r.Model, model)
		}
		var stream bool
		if raw, ok := top["stream"]; ok && string(raw) != "null" {
			if json.Unmarshal(raw, &stream) != nil {
				t.Fatalf("Inspect accepted a non-boolean stream: %q", body)
			}
		}
		if stream != r.Stream {
			t.Fatalf("stream %v vs %v", r.Stream, stream)
		}
		if r.Stream {
			out, err := WithIncludeUsage(body, r)
			if err != nil {
				t.Fatal(err)
			}
			if r2, err := Inspect(out); err != nil || !r2.IncludeUsage || r2.Model != r.Model {
				t.Fatalf("WithIncludeUsage(%q) = %q: %+v %v", body, out, r2, err)
			}
		}
	})
}

func TestResponseUsageFromATail(t *testing.T) {
	body := `{"id":"x","choices":[{"text":"the \"usage\": {\"prompt_tokens\": 99} is not it"}],"usage":{"prompt_tokens":12,"completion_tokens":5,"total_tokens":17}}`
	for _, tail := range []string{body, body[40:], body[len(body)-70:]} {
		u, ok := ResponseUsage([]byte(tail))
		if !ok || u.PromptTokens != 12 || u.CompletionTokens != 5 {
			t.Errorf("ResponseUsage(%q) = %+v %v", tail, u, ok)
		}
	}
	if _, ok := ResponseUsage([]byte(body[:len(body)-30])); ok {
		t.Error("a cut usage object was read")
	}
}

// FuzzResponseUsage holds ResponseUsage to a full decode of the documents
// whose top level has a usage object last.
func FuzzResponseUsage(f *testing.F) {
	for _, s := range []string{
		`{"choices":[{"text":"usage"}],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}`,
		`{"usage":null}`, `{"usage": {"prompt_tokens_details": {"cached_tokens": 7}}}`, `"usage":`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got, ok := ResponseUsage(body) // never panics
		// the oracle: the top-level key exactly "usage" (encoding/json would
		// match struct fields case-insensitively; servers send "usage")
		var top map[string]json.RawMessage
		if json.Unmarshal(body, &top) != nil {
			return
		}
		raw, exact := top["usage"]
		var u *Usage
		if !exact || json.Unmarshal(raw, &u) != nil || u == nil {
			return
		}
		doc := struct{ Usage *Usage }{u}
		// The tail reading is exact when "usage" is there once.
		if bytes.Count(body, []byte(`"usage"`)) != 1 {
			return
		}
		if !ok {
			t.Fatalf("no usage read from %q", body)
		}
		if got.PromptTokens != doc.Usage.PromptTokens || got.CompletionTokens != doc.Usage.CompletionTokens || got.CachedTokens() != doc.Usage.CachedTokens() {
			t.Fatalf("%+v vs %+v", got, *doc.Usage)
		}
	})
}
