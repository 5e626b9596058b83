package server

import "github.com/hermod/hermod/tools/vllm-sim/internal/engine"

// appendTokenText appends the text of output token i of a sequence.
func appendTokenText(dst []byte, seed uint64, i int) []byte {
	return engine.AppendOutputText(dst, seed, i)
}
