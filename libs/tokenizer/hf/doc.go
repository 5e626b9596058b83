// Package hf loads Hugging Face tokenizer.json files of byte-level BPE
// tokenizers (Llama 3, Qwen 2 and 3, GPT-2 style) in pure Go and encodes
// text into the same token ids as the Hugging Face tokenizers library, the
// one vLLM tokenizes prompts with.
//
// The pipeline mirrors the library's: added tokens are split out of the
// text first (longest match first, honouring lstrip, rstrip, single_word and
// normalized), the rest is normalized (NFC and friends), cut into words by
// the pre-tokenizer (the Llama 3 / GPT-4, Qwen 2 and GPT-2 split patterns
// are implemented by hand, lookahead included), each word is mapped to
// GPT-2's byte-level alphabet and merged by BPE rank, and the
// post-processor adds special tokens such as Llama 3's <|begin_of_text|>.
//
// Anything in a file that would change ids and is not implemented is
// refused at load time with an error naming the JSON field (and wrapping
// ErrUnsupported), never silently ignored.
package hf
