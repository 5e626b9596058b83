package extproc

import "testing"

// FuzzAccounting feeds arbitrary response bodies, whole and in pieces:
// the accounting never panics, stays bounded, and (for bodies within the
// event bound) does not depend on where the body was cut.
func FuzzAccounting(f *testing.F) {
	f.Add([]byte("data: {\"choices\":[]}\n\ndata: {\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2}}\n\ndata: [DONE]\n\n"), true, uint8(5))
	f.Add([]byte(`{"choices":[{"text":"hi"}],"usage":{"prompt_tokens":1,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":1}}}`), false, uint8(3))
	f.Add([]byte("data: a\r\n\r\ndata: b\n\r\n"), true, uint8(1))
	f.Fuzz(func(t *testing.T, body []byte, sse bool, step uint8) {
		whole := NewAccounting(sse)
		whole.Feed(body)
		whole.Finish()

		pieces := NewAccounting(sse)
		n := int(step) + 1
		for off := 0; off < len(body); off += n {
			pieces.Feed(body[off:min(off+n, len(body))])
		}
		pieces.Finish()

		if len(pieces.tail) > tailSize || len(pieces.pending) > maxEventSize+int(step)+1 {
			t.Fatalf("unbounded: tail %d, pending %d", len(pieces.tail), len(pieces.pending))
		}
		if len(body) > maxEventSize {
			return
		}
		u1, ok1, e1 := whole.Result()
		u2, ok2, e2 := pieces.Result()
		if u1 != u2 || ok1 != ok2 || e1 != e2 {
			t.Fatalf("whole: %+v %t %d; in pieces of %d: %+v %t %d", u1, ok1, e1, n, u2, ok2, e2)
		}
		if u, ok := ResponseUsage(body); ok && (u.PromptTokens < 0 || u.CompletionTokens < 0 || u.CachedTokens < 0) {
			t.Fatalf("negative counts %+v", u)
		}
	})
}
