package openai

import (
	"fmt"
	"strings"
	"testing"
)

// chatBody is a chat request of n turns of about 400 characters each.
func chatBody(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"model":"meta-llama/Llama-3.1-8B-Instruct","stream":true,"max_tokens":256,"temperature":0.7,"messages":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"role":"user","content":"turn %d: %s"}`, i, strings.Repeat("lorem ipsum dolor sit amet, ", 14))
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

func BenchmarkParseChat(b *testing.B) {
	for _, turns := range []int{1, 16} {
		body := chatBody(turns)
		b.Run(fmt.Sprintf("turns=%d", turns), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Parse(APIChatCompletions, body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkAccountantStream(b *testing.B) {
	var s strings.Builder
	for range 256 {
		s.WriteString(`data: {"id":"cmpl-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"tok"}}]}` + "\n\n")
	}
	s.WriteString(`data: {"id":"cmpl-1","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":256,"total_tokens":266}}` + "\n\ndata: [DONE]\n\n")
	body := []byte(s.String())
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		a := NewAccountant(true, true)
		for off := 0; off < len(body); off += 512 {
			a.Feed(body[off:min(off+512, len(body))])
		}
		a.Finish()
	}
}
