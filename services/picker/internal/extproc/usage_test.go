package extproc

import (
	"strings"
	"testing"
)

func TestResponseUsage(t *testing.T) {
	cases := []struct {
		name string
		body string
		want Usage
		ok   bool
	}{
		{"vllm", `{"id":"x","choices":[{"text":"hi"}],"usage":{"prompt_tokens":12,"total_tokens":15,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":8}}}`, Usage{12, 8, 3}, true},
		{"spaced", "{\"usage\" :\n {\"prompt_tokens\": 1, \"completion_tokens\": 2}}", Usage{1, 0, 2}, true},
		{"nested usage of another shape first", `{"choices":[{"usage":"n/a"}],"usage":{"prompt_tokens":4,"completion_tokens":5}}`, Usage{4, 0, 5}, true},
		{"last wins", `{"a":{"usage":{"prompt_tokens":1}},"usage":{"prompt_tokens":9,"completion_tokens":1}}`, Usage{9, 0, 1}, true},
		{"in a string", `{"text":"\"usage\":{\"prompt_tokens\":5}"}`, Usage{}, false},
		{"null", `{"usage":null}`, Usage{}, false},
		{"none", `{"choices":[]}`, Usage{}, false},
		{"negative counts", `{"usage":{"prompt_tokens":-3,"completion_tokens":2}}`, Usage{0, 0, 2}, true},
		{"truncated head (a tail)", `ens":3}]},"usage":{"prompt_tokens":2,"completion_tokens":1}}`, Usage{2, 0, 1}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := ResponseUsage([]byte(tc.body))
			if ok != tc.ok || got != tc.want {
				t.Errorf("ResponseUsage = %+v, %t; want %+v, %t", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestAccountingSSE(t *testing.T) {
	stream := "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}],\"usage\":null}\r\n\r\n" +
		": a comment\n\n" +
		"event: message\ndata: {\"choices\":[{\"delta\":{\"content\":\"b\"}}]}\n\n" +
		"data: {\"choices\":[],\n" + "data: \"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2}}\n\n" +
		"data: [DONE]\n\n"
	for _, size := range []int{1, 2, 3, 7, 64, len(stream)} {
		a := NewAccounting(true)
		for off := 0; off < len(stream); off += size {
			a.Feed([]byte(stream[off:min(off+size, len(stream))]))
		}
		a.Finish()
		u, ok, events := a.Result()
		if !ok || u != (Usage{3, 0, 2}) || events != 3 {
			t.Errorf("fed %d bytes at a time: %+v %t %d events, want {3 0 2} true 3", size, u, ok, events)
		}
	}
}

// A last event without its blank line still counts; an event larger than
// the bound is passed over, and the events after it count.
func TestAccountingSSEEdges(t *testing.T) {
	a := NewAccounting(true)
	a.Feed([]byte("data: {\"x\":1}\n\ndata: {\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1}}"))
	a.Finish()
	if u, ok, n := a.Result(); !ok || u.PromptTokens != 1 || n != 2 {
		t.Errorf("unterminated last event: %+v %t %d", u, ok, n)
	}

	a = NewAccounting(true)
	huge := "data: " + strings.Repeat("x", maxEventSize+10) + "\n"
	for off := 0; off < len(huge); off += 4096 {
		a.Feed([]byte(huge[off:min(off+4096, len(huge))]))
	}
	a.Feed([]byte("\ndata: {\"usage\":{\"completion_tokens\":6}}\n\n"))
	a.Finish()
	if u, ok, n := a.Result(); !ok || u.CompletionTokens != 6 || n != 1 {
		t.Errorf("after an oversized event: %+v %t %d", u, ok, n)
	}
	if len(a.pending) > 3 || cap(a.pending) > 2*maxEventSize+8192 {
		t.Errorf("pending holds %d bytes (cap %d)", len(a.pending), cap(a.pending))
	}
}

// A JSON body's usage is read from its tail, however large the body.
func TestAccountingJSONTail(t *testing.T) {
	a := NewAccounting(false)
	a.Feed([]byte(`{"choices":[{"text":"`))
	for range 40 {
		a.Feed([]byte(strings.Repeat("y", 8<<10)))
	}
	a.Feed([]byte(`"}],"usage":{"prompt_tokens":5,"completion_tokens":7}}`))
	a.Finish()
	if u, ok, _ := a.Result(); !ok || u != (Usage{5, 0, 7}) {
		t.Errorf("usage %+v %t", u, ok)
	}
	if len(a.tail) > tailSize {
		t.Errorf("tail holds %d bytes", len(a.tail))
	}
}
