package hf

import (
	"encoding/json"
	"testing"
)

// tinyMerges are the tiny tokenizer's merges (raw bytes), by rank.
var tinyMerges = [][2]string{
	{"t", "h"}, {"th", "e"}, {" ", "the"}, {"i", "n"}, {"in", "g"}, {" ", "a"}, {" a", "n"}, {" an", "d"},
	{"e", "r"}, {" ", " "}, {"  ", "  "}, {"\n", "\n"}, {"a", "a"}, {"aa", "aa"}, {"\xe4", "\xb8"}, {"\xe4\xb8", "\xad"},
	{"'", "s"}, {"1", "2"}, {"12", "3"},
}

// tinyAddedID is the id of the i-th added token of the tiny tokenizer
// (they follow the model's tokens).
func tinyAddedID(i int) uint32 { return uint32(256 + len(tinyMerges) + i) }

// tinyDoc returns a small byte-level BPE tokenizer.json, as a document the
// caller may change: ids 0-255 are the bytes, then one token per merge,
// then the added tokens <|bos|> (special), <|eos|> (special) and <tool>
// (not special). It pre-tokenizes like Llama 3 and adds <|bos|>.
func tinyDoc() map[string]any {
	vocab := map[string]int{}
	for b := range 256 {
		vocab[string(byteToRune[b])] = b
	}
	var merges [][2]string
	for _, m := range tinyMerges {
		left, right := byteLevelEncode(m[0]), byteLevelEncode(m[1])
		merges = append(merges, [2]string{left, right})
		vocab[left+right] = len(vocab)
	}
	n := len(vocab)
	return map[string]any{
		"version":    "1.0",
		"truncation": nil,
		"padding":    nil,
		"added_tokens": []any{
			map[string]any{"id": n, "content": "<|bos|>", "special": true, "normalized": false},
			map[string]any{"id": n + 1, "content": "<|eos|>", "special": true, "normalized": false},
			map[string]any{"id": n + 2, "content": "<tool>", "special": false, "normalized": false},
		},
		"normalizer": nil,
		"pre_tokenizer": map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Split", "pattern": map[string]any{"Regex": patternCL100K}, "behavior": "Isolated", "invert": false},
			map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false},
		}},
		"post_processor": map[string]any{"type": "TemplateProcessing",
			"single": []any{map[string]any{"SpecialToken": map[string]any{"id": "<|bos|>", "type_id": 0}}, map[string]any{"Sequence": map[string]any{"id": "A", "type_id": 0}}},
			"pair": []any{map[string]any{"SpecialToken": map[string]any{"id": "<|bos|>", "type_id": 0}}, map[string]any{"Sequence": map[string]any{"id": "A", "type_id": 0}},
				map[string]any{"Sequence": map[string]any{"id": "B", "type_id": 1}}},
			"special_tokens": map[string]any{"<|bos|>": map[string]any{"id": "<|bos|>", "ids": []int{n}, "tokens": []string{"<|bos|>"}}},
		},
		"decoder": map[string]any{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
		"model": map[string]any{
			"type": "BPE", "dropout": nil, "unk_token": nil, "continuing_subword_prefix": nil, "end_of_word_suffix": nil,
			"fuse_unk": false, "byte_fallback": false, "ignore_merges": false, "vocab": vocab, "merges": merges,
		},
	}
}

func marshalDoc(tb testing.TB, doc map[string]any) []byte {
	tb.Helper()
	data, err := json.Marshal(doc)
	if err != nil {
		tb.Fatal(err)
	}
	return data
}

// tiny loads tinyDoc, changed by edit if it is not nil.
func tiny(tb testing.TB, edit func(doc map[string]any), opts ...Option) *Tokenizer {
	tb.Helper()
	doc := tinyDoc()
	if edit != nil {
		edit(doc)
	}
	t, err := Load(marshalDoc(tb, doc), opts...)
	if err != nil {
		tb.Fatal(err)
	}
	return t
}

// tinyID returns the id of a token of the tiny tokenizer (raw text).
func tinyID(tb testing.TB, t *Tokenizer, token string) uint32 {
	tb.Helper()
	if id, ok := t.model.(*bpe).vocab[token]; ok {
		return id
	}
	for id, s := range t.vocab.tokens {
		if s == token {
			return id
		}
	}
	tb.Fatalf("no token %q", token)
	return 0
}
