package hf

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/hermod/hermod/libs/tokenizer/hf/internal/npmtokenizers"
)

// benchTexts are the inputs of BenchmarkEncode: "corpus" is the test
// corpus (prose, code, numbers, many scripts, special tokens) repeated to
// about 1 MB, so most words come from the word cache, as in real traffic;
// "random" is about 1 MB of random lower-case words and numbers, most of
// them new, which measures the BPE merge loop.
func benchTexts(b *testing.B) map[string]string {
	corpus := readCorpus(b)
	var sb strings.Builder
	for sb.Len() < 1<<20 {
		for _, s := range corpus {
			sb.WriteString(s)
			sb.WriteByte('\n')
		}
	}
	rng := rand.New(rand.NewPCG(1, 1))
	var rb strings.Builder
	for rb.Len() < 1<<20 {
		for range 2 + rng.IntN(9) {
			rb.WriteByte(byte('a' + rng.IntN(26)))
		}
		if rng.IntN(8) == 0 {
			rb.WriteString(" 20")
			rb.WriteByte(byte('0' + rng.IntN(10)))
		}
		rb.WriteString([]string{" ", " ", " ", ", ", ".\n"}[rng.IntN(5)])
	}
	return map[string]string{"corpus": sb.String(), "random": rb.String()}
}

// BenchmarkEncode measures single-goroutine throughput (MB/s of input) of
// the real Llama 3 and Qwen 3 (byte-level BPE), Gemma 3 (SentencePiece
// BPE: no pre-tokenizer, so each stretch between newlines, which are added
// tokens, is one word) tokenizers (skipped if they cannot be fetched), of
// the Unigram test tokenizer and of the tiny test tokenizer.
func BenchmarkEncode(b *testing.B) {
	texts := benchTexts(b)
	for _, name := range []string{"llama3", "qwen3", "gemma3", "unigram", "tiny"} {
		for _, input := range []string{"corpus", "random"} {
			b.Run(name+"/"+input, func(b *testing.B) {
				var tok *Tokenizer
				switch name {
				case "llama3":
					tok = loadReal(b, npmtokenizers.Llama3)
				case "qwen3":
					tok = loadReal(b, npmtokenizers.Qwen3)
				case "gemma3":
					tok = loadReal(b, npmtokenizers.Gemma3)
				case "unigram":
					tok = loadReference(b, name, referenceTokenizer{File: "unigram/tokenizer.json"})
				default:
					tok = tiny(b, nil)
				}
				text := texts[input]
				buf := tok.Encode(nil, text) // warm the word cache
				b.SetBytes(int64(len(text)))
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					buf = tok.Encode(buf[:0], text)
				}
			})
		}
	}
}

// BenchmarkEncodeParallel measures throughput with one goroutine per CPU.
func BenchmarkEncodeParallel(b *testing.B) {
	tok := loadReal(b, npmtokenizers.Qwen3)
	text := benchTexts(b)["corpus"]
	b.SetBytes(int64(len(text)))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var buf []uint32
		for pb.Next() {
			buf = tok.Encode(buf[:0], text)
		}
	})
}

func BenchmarkLoad(b *testing.B) {
	for _, pkg := range []npmtokenizers.Package{npmtokenizers.Llama3, npmtokenizers.Qwen3, npmtokenizers.Gemma3} {
		b.Run(pkg.Name, func(b *testing.B) {
			data := packageFiles(b, pkg).TokenizerJSON
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if _, err := Load(data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
