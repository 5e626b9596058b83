package extproc

import (
	"encoding/json"
	"testing"
)

func TestInspectBody(t *testing.T) {
	cases := []struct {
		body   string
		model  string
		stream bool
	}{
		{`{"model":"llama","prompt":"x","stream":true}`, "llama", true},
		{` { "stream" : false , "model" : "a\"b\\" } `, `a"b\`, false},
		{`{"messages":[{"role":"user","content":"\"model\":\"no\",\"stream\":true"}],"model":"m"}`, "m", false},
		{`{"nested":{"model":"inner","stream":true},"model":"outer"}`, "outer", false},
		{`{"model":"first","model":"last","stream":true,"stream":false}`, "last", false},
		{`{"model":42,"stream":"yes"}`, "", false},
		{`{"model":"\u006cl","stream":null}`, "ll", false},
		{`{"prompt":[1,2,{"a":[3]}],"max_tokens":8,"model":"after-array","stream":true}`, "after-array", true},
		{`[]`, "", false},
		{``, "", false},
	}
	for _, tc := range cases {
		m, s := inspectBody([]byte(tc.body))
		if m != tc.model || s != tc.stream {
			t.Errorf("inspectBody(%s) = %q, %t; want %q, %t", tc.body, m, s, tc.model, tc.stream)
		}
	}
}

// FuzzInspectBody holds the scanner to encoding/json on valid JSON
// objects, and to not panicking on anything.
func FuzzInspectBody(f *testing.F) {
	f.Add([]byte(`{"model":"llama","prompt":"x","stream":true}`))
	f.Add([]byte(`{"messages":[{"content":"\\\"model\\\":1"}],"model":"m\\","stream":false}`))
	f.Add([]byte(`{"a":{"b":[1,"]}",{"c":"{"}]},"model":"z"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		model, stream := inspectBody(body)
		var obj map[string]json.RawMessage
		if json.Unmarshal(body, &obj) != nil {
			return
		}
		var wantModel string
		var wantStream bool
		_ = json.Unmarshal(obj["model"], &wantModel)
		_ = json.Unmarshal(obj["stream"], &wantStream)
		if model != wantModel || stream != wantStream {
			t.Fatalf("inspectBody(%q) = %q, %t; encoding/json: %q, %t", body, model, stream, wantModel, wantStream)
		}
	})
}
