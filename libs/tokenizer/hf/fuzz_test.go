package hf

import (
	"testing"

	"github.com/hermod/hermod/libs/tokenizer/hf/internal/npmtokenizers"
)

// FuzzLoad: Load never panics, and what it loads encodes without panicking
// into ids below VocabSize.
func FuzzLoad(f *testing.F) {
	f.Add(marshalDoc(f, tinyDoc()))
	f.Add([]byte(`{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a a"]}}`))
	f.Add([]byte(`{"model": null, "added_tokens": [{"id": 1}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		tok, err := Load(data)
		if err != nil {
			return
		}
		for _, text := range []string{"", "Hello, world!  \n\n1234 'S", "<|bos|><tool>中文🙂", "\xff\xfe"} {
			for _, id := range tok.Encode(nil, text) {
				if int(id) >= tok.VocabSize() {
					t.Fatalf("%q: id %d >= VocabSize %d", text, id, tok.VocabSize())
				}
			}
		}
	})
}

// FuzzEncode: Encode never panics, its ids are below VocabSize, and for
// text without added tokens the ids decode back to the (normalized) text.
// It runs the tiny tokenizer, with and without NFC, and the real Llama 3
// and Qwen 3 tokenizers when they can be had.
func FuzzEncode(f *testing.F) {
	for _, s := range []string{"Hello, world!", "  leading and trailing  ", "it's 1234567 o'clock\r\n\r\n", "cafe\u0301 中文 🙂", "<|bos|>x<tool>", "\xff\xfe\x00"} {
		f.Add(s)
	}
	toks := []*Tokenizer{
		tiny(f, nil),
		tiny(f, func(doc map[string]any) { doc["normalizer"] = map[string]any{"type": "NFC"} }),
	}
	for _, pkg := range []npmtokenizers.Package{npmtokenizers.Llama3, npmtokenizers.Qwen3} {
		if files, err := tryPackageFiles(pkg); err == nil {
			tok, err := Load(files.TokenizerJSON)
			if err != nil {
				f.Fatal(err)
			}
			toks = append(toks, tok)
		}
	}
	f.Fuzz(func(t *testing.T, text string) {
		for _, tok := range toks {
			ids := tok.EncodeWithSpecial(nil, text, false)
			for _, id := range ids {
				if int(id) >= tok.VocabSize() {
					t.Fatalf("%q: id %d >= VocabSize %d", text, id, tok.VocabSize())
				}
			}
			if _, _, _, found := tok.added.next(text, 0); found {
				continue
			}
			if _, _, _, found := tok.addedNorm.next(tok.normalizer.apply(text), 0); found {
				continue
			}
			got, err := tok.Decode(ids)
			if err != nil {
				t.Fatal(err)
			}
			if want := tok.normalizer.apply(text); got != want {
				t.Fatalf("%s: %q encodes to %v, which decodes to %q", tok.Name(), text, ids, got)
			}
		}
	})
}
