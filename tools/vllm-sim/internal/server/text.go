package server

import (
	"unicode/utf8"

	"github.com/hermod/hermod/tools/vllm-sim/internal/engine"
)

// words are the vocabulary of generated text; output token i of a sequence
// reads as words[OutputToken(seed, i) % len(words)], after a space except
// for the first token.
var words = [...]string{
	"the", "of", "and", "to", "in", "a", "is", "that", "for", "it", "as", "was", "with", "be", "by", "on",
	"not", "he", "this", "are", "or", "his", "from", "at", "which", "but", "have", "an", "had", "they", "you", "were",
	"their", "one", "all", "we", "can", "her", "has", "there", "been", "if", "more", "when", "will", "would", "who", "so",
	"no", "model", "token", "cache", "request", "latency", "routing", "engine", "prefill", "decode", "batch", "kernel", "memory", "tensor",
	"graph", "layer", "attention", "sequence", "prompt", "output", "server", "cluster", "queue", "block", "prefix", "throughput", "scheduler", "gateway",
	"inference", "serving", "adapter", "context", "window", "vector", "matrix", "gradient", "sample", "stream", "event", "index", "metric", "signal",
	"time", "first", "new", "other", "some", "what", "only", "into", "two", "over", "also", "after", "most", "many", "these", "then",
	"system", "data", "work", "part", "world", "state", "value", "order", "point", "process", "result", "level", "case", "number", "form", "line",
}

// appendTokenText appends the text of output token i of a sequence.
func appendTokenText(dst []byte, seed uint64, i int) []byte {
	if i > 0 {
		dst = append(dst, ' ')
	}
	return append(dst, words[engine.OutputToken(seed, i)%uint32(len(words))]...)
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string (no HTML escaping).
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
