package openai

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// feedAll passes body through an Accountant in reads of the given sizes
// (each cut is a size-1; none left: the rest at once) and returns what
// was passed on.
func feedAll(a *Accountant, body, cuts []byte) []byte {
	var out []byte
	for len(body) > 0 {
		n := len(body)
		if len(cuts) > 0 {
			n = min(n, int(cuts[0])+1)
			cuts = cuts[1:]
		}
		out = append(out, a.Feed(body[:n])...)
		body = body[n:]
	}
	return append(out, a.Finish()...)
}

func TestAccountantStream(t *testing.T) {
	stream := "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}],\"usage\":null}\r\n\r\n" +
		": a comment\n\n" +
		"event: message\ndata: {\"choices\":[{\"delta\":{\"content\":\"b\"}}]}\n\n" +
		"data: {\"choices\":[],\n" + "data: \"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2,\"prompt_tokens_details\":{\"cached_tokens\":1}}}\n\n" +
		"data: [DONE]\n\n"
	for _, size := range []int{1, 2, 3, 7, 64, len(stream)} {
		a := NewAccountant(true, false)
		var out []byte
		for off := 0; off < len(stream); off += size {
			out = append(out, a.Feed([]byte(stream[off:min(off+size, len(stream))]))...)
		}
		out = append(out, a.Finish()...)
		o := a.Observed()
		if !o.HaveUsage || o.Usage != (Usage{3, 1, 2}) || o.Events != 3 || o.FirstToken.IsZero() {
			t.Errorf("fed %d bytes at a time: %+v, want usage {3 1 2} and 3 events", size, o)
		}
		if string(out) != stream {
			t.Errorf("fed %d bytes at a time: passed on %q", size, out)
		}
	}
}

func TestAccountantStripsOnlyTheUsageChunk(t *testing.T) {
	in := "data: {\"choices\":[{\"text\":\"a\"}]}\n\n" +
		"data: {\"choices\":[{\"text\":\"b\"}],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1,\"total_tokens\":2}}\n\n" +
		"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":2,\"total_tokens\":3}}\n\n" +
		"data: [DONE]\n\n"
	a := NewAccountant(true, true)
	out := feedAll(a, []byte(in), []byte{5, 40, 3, 90})
	want := "data: {\"choices\":[{\"text\":\"a\"}]}\n\n" +
		"data: {\"choices\":[{\"text\":\"b\"}],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1,\"total_tokens\":2}}\n\n" +
		"data: [DONE]\n\n"
	if string(out) != want {
		t.Errorf("out:\n%s", out)
	}
	if o := a.Observed(); o.Events != 2 || !o.HaveUsage || o.Usage.CompletionTokens != 2 {
		t.Errorf("observed %+v", o)
	}
}

// A last event without its blank line still counts; an event larger than
// the bound is passed on unread, and the events after it count.
func TestAccountantStreamEdges(t *testing.T) {
	a := NewAccountant(true, false)
	in := "data: {\"x\":1}\n\ndata: {\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1}}"
	if out := feedAll(a, []byte(in), nil); string(out) != in {
		t.Errorf("passed on %q", out)
	}
	if o := a.Observed(); !o.HaveUsage || o.Usage.PromptTokens != 1 || o.Events != 2 {
		t.Errorf("unterminated last event: %+v", o)
	}

	for _, strip := range []bool{false, true} {
		a = NewAccountant(true, strip)
		huge := "data: " + strings.Repeat("x", MaxEventBytes+10) + "\n"
		in := huge + "\ndata: {\"usage\":{\"completion_tokens\":6},\"choices\":[{}]}\n\n"
		var out []byte
		for off := 0; off < len(in); off += 4096 {
			out = append(out, a.Feed([]byte(in[off:min(off+4096, len(in))]))...)
			if len(a.pending) > MaxEventBytes+4096 {
				t.Fatalf("pending holds %d bytes", len(a.pending))
			}
		}
		out = append(out, a.Finish()...)
		if o := a.Observed(); !o.HaveUsage || o.Usage.CompletionTokens != 6 || o.Events != 2 {
			t.Errorf("after an oversized event: %+v", o)
		}
		if string(out) != in {
			t.Errorf("strip %t: the stream changed (%d bytes in, %d out)", strip, len(in), len(out))
		}
	}
}

// A JSON body passes as it is; its usage is read from its tail, however
// large the body.
func TestAccountantJSON(t *testing.T) {
	a := NewAccountant(false, true)
	before := time.Now()
	var in, out []byte
	feed := func(p string) {
		in = append(in, p...)
		out = append(out, a.Feed([]byte(p))...)
	}
	feed(`{"choices":[{"text":"`)
	for range 40 {
		feed(strings.Repeat("y", 8<<10))
	}
	feed(`"}],"usage":{"prompt_tokens":5,"completion_tokens":7}}`)
	a.Finish()
	if o := a.Observed(); !o.HaveUsage || o.Usage != (Usage{5, 0, 7}) || o.FirstToken.Before(before) || o.Events != 0 {
		t.Errorf("observed %+v", o)
	}
	if len(a.tail) > TailBytes || !bytes.Equal(in, out) {
		t.Errorf("tail holds %d bytes; body changed: %t", len(a.tail), !bytes.Equal(in, out))
	}
}

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
		got, ok := ResponseUsage([]byte(tc.body))
		if ok != tc.ok || got != tc.want {
			t.Errorf("%s: ResponseUsage = %+v, %t; want %+v, %t", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

func TestChunkUsage(t *testing.T) {
	u, only, ok := ChunkUsage([]byte(`{"id":"c","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}`))
	if !ok || !only || u.CompletionTokens != 4 || u.CachedTokens != 0 {
		t.Errorf("final chunk %+v %v %v", u, only, ok)
	}
	if _, only, ok := ChunkUsage([]byte(`{"choices":[{"delta":{"content":"hi"}}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`)); !ok || only {
		t.Error("continuous usage chunk taken as usage-only")
	}
	if _, _, ok := ChunkUsage([]byte(`{"choices":[{"delta":{"content":"\"usage\": {"}}]}`)); ok {
		t.Error("usage read from content")
	}
}

// FuzzAccountant holds the accountant to its contract however a body is
// cut into reads: without stripping it passes the body on byte for byte;
// with stripping the output and the accounting do not depend on the cuts
// (for bodies within the event bound) and only bytes are removed; memory
// stays bounded.
func FuzzAccountant(f *testing.F) {
	f.Add([]byte("data: {\"choices\":[{\"text\":\"a\"}]}\n\ndata: {\"choices\":[],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":2,\"total_tokens\":3}}\n\ndata: [DONE]\n\n"), []byte{3, 7, 1}, true)
	f.Add([]byte(": ping\r\n\r\ndata: x\r\n\r\ndata: [DONE]\r\n\r\n"), []byte{0, 0, 5}, true)
	f.Add([]byte("data: {\"usage\": {\"completion_tokens\": 4}, \"choices\": []}\n\n"), []byte{}, true)
	f.Add([]byte(`{"choices":[{"text":"hi"}],"usage":{"prompt_tokens":1,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":1}}}`), []byte{2}, false)
	f.Fuzz(func(t *testing.T, body, cuts []byte, sse bool) {
		for _, strip := range []bool{false, true} {
			whole := NewAccountant(sse, strip)
			pieces := NewAccountant(sse, strip)
			ow := feedAll(whole, body, nil)
			op := feedAll(pieces, body, cuts)
			if !strip || !sse {
				if !bytes.Equal(ow, body) || !bytes.Equal(op, body) {
					t.Fatalf("strip %t sse %t: body changed:\nin     %q\nwhole  %q\npieces %q", strip, sse, body, ow, op)
				}
			}
			if len(op) > len(body) || len(pieces.tail) > TailBytes || len(pieces.pending) > MaxEventBytes+256 {
				t.Fatalf("out %d of %d bytes, tail %d, pending %d", len(op), len(body), len(pieces.tail), len(pieces.pending))
			}
			// an Anthropic stream passes on as sent, whatever the cuts
			msgs := feedAll(NewAccountantFor(APIMessages, sse, strip), body, cuts)
			if !bytes.Equal(msgs, body) {
				t.Fatalf("messages sse %t: body changed:\nin  %q\nout %q", sse, body, msgs)
			}
			if len(body) > MaxEventBytes {
				continue
			}
			w, p := whole.Observed(), pieces.Observed()
			if !bytes.Equal(ow, op) || w.Events != p.Events || w.Usage != p.Usage || w.HaveUsage != p.HaveUsage {
				t.Fatalf("strip %t: depends on the cuts:\n%q %+v\n%q %+v", strip, ow, w, op, p)
			}
		}
	})
}
