package server

import (
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
