// Package hf loads Hugging Face tokenizer.json files in pure Go and
// encodes text into the same token ids as the Hugging Face tokenizers
// library, the one vLLM tokenizes prompts with. It supports byte-level BPE
// (Llama 3, Qwen 2 and 3, DeepSeek V3, gpt-oss, GPT-2 style),
// SentencePiece-style BPE on characters with byte_fallback (Llama 2,
// Gemma) and Unigram models.
//
// The pipeline mirrors the library's: added tokens are split out of the
// text first (longest match first, honouring lstrip, rstrip, single_word and
// normalized), the rest is normalized (NFC and friends, Replace and Prepend
// of literal strings), cut into words by the pre-tokenizer (the Llama 3 /
// GPT-4, Qwen 2, GPT-2, o200k and DeepSeek V3 split patterns are
// implemented by hand, lookahead included; literal Split patterns with
// every behaviour; Metaspace; WhitespaceSplit), each word is encoded by
// the model (BPE merges by rank, on GPT-2's byte-level alphabet or on
// characters; Unigram by Viterbi over the piece scores), and the
// post-processor adds special tokens such as Llama 3's <|begin_of_text|>.
//
// Anything in a file that would change ids and is not implemented is
// refused at load time with an error naming the JSON field (and wrapping
// ErrUnsupported), never silently ignored.
package hf
