package hf

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/hermod/hermod/libs/tokenizer/hf/internal/npmtokenizers"
)

// FuzzLoad: Load never panics, and what it loads encodes without panicking
// into ids below VocabSize.
func FuzzLoad(f *testing.F) {
	f.Add(marshalDoc(f, tinyDoc()))
	f.Add([]byte(`{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a a"]}}`))
	f.Add([]byte(`{"model": null, "added_tokens": [{"id": 1}]}`))
	f.Add(marshalDoc(f, spDoc(nil)))
	f.Add(marshalDoc(f, uniDoc(nil)))
	f.Add([]byte(`{"model": {"type": "Unigram", "unk_id": 0, "vocab": [["<unk>", 0], ["a", -1]]}, "pre_tokenizer": {"type": "Metaspace", "prepend_scheme": "first"}}`))
	f.Add([]byte(`{"model": {"type": "BPE", "vocab": {"a": 0, "<0x62>": 1}, "byte_fallback": true, "merges": []}, "pre_tokenizer": {"type": "Split", "pattern": {"String": "a"}, "behavior": "MergedWithNext"}}`))
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
// text without added tokens the ids decode back to the (normalized) text
// (for SentencePiece-style tokenizers: up to "▁" and spaces, and unless the
// text had characters the model does not know). It runs the tiny
// tokenizer, with and without NFC, the small SentencePiece BPE and
// Unigram ones, the Unigram test tokenizer, and the real tokenizers when
// they can be had (under -race, those not in noRacePackages).
func FuzzEncode(f *testing.F) {
	for _, s := range []string{"Hello, world!", "  leading and trailing  ", "it's 1234567 o'clock\r\n\r\n", "cafe\u0301 中文 🙂", "<|bos|>x<tool>", "\xff\xfe\x00"} {
		f.Add(s)
	}
	toks := []*Tokenizer{
		tiny(f, nil),
		tiny(f, func(doc map[string]any) { doc["normalizer"] = map[string]any{"type": "NFC"} }),
	}
	toks = append(toks, loadDoc(f, spDoc(nil)), loadDoc(f, spDoc(map[string]any{"byte_fallback": false})), loadDoc(f, uniDoc(nil)))
	if data, err := os.ReadFile("testdata/unigram/tokenizer.json"); err == nil {
		tok, err := Load(data)
		if err != nil {
			f.Fatal(err)
		}
		toks = append(toks, tok)
	}
	for _, pkg := range npmtokenizers.All {
		if raceEnabled && noRacePackages[pkg.Name] {
			continue // too slow to load under -race; make fuzz-smoke fuzzes them without it
		}
		tok, err := tryLoadReal(pkg)
		switch {
		case errors.Is(err, npmtokenizers.ErrUnreachable):
		case err != nil:
			f.Fatal(err)
		default:
			toks = append(toks, tok)
		}
	}
	f.Fuzz(func(t *testing.T, text string) {
		for _, tok := range toks {
			checkRoundTrip(t, tok, text)
		}
	})
}

// checkRoundTrip checks the ids of text: below VocabSize, and decoding
// back to it where they can.
func checkRoundTrip(t *testing.T, tok *Tokenizer, text string) {
	ids := tok.EncodeWithSpecial(nil, text, false)
	for _, id := range ids {
		if int(id) >= tok.VocabSize() {
			t.Fatalf("%q: id %d >= VocabSize %d", text, id, tok.VocabSize())
		}
	}
	if _, _, _, found := tok.added.next(text, 0); found {
		return
	}
	if _, _, _, found := tok.addedNorm.next(tok.normalizer.apply(text), 0); found {
		return
	}
	got, err := tok.Decode(ids)
	if err != nil {
		t.Fatal(err)
	}
	want := tok.normalizer.apply(text)
	if !tok.pre.byteLevel {
		if unk, ok := unkID(tok); ok && slices.Contains(ids, unk) {
			return
		}
		got, want = withoutSpaces(got), withoutSpaces(want)
	}
	if got != want {
		t.Fatalf("%s: %q encodes to %v, which decodes to %q", tok.Name(), text, ids, got)
	}
}

// unkID returns the model's unknown token, if it has one.
func unkID(tok *Tokenizer) (uint32, bool) {
	switch m := tok.model.(type) {
	case *unigram:
		return m.unkID, true
	case *bpe:
		if m.chars != nil && m.chars.unk >= 0 {
			return uint32(m.chars.unk), true
		}
	}
	return 0, false
}

// withoutSpaces drops spaces and "▁", which SentencePiece-style
// tokenizers add, replace or (WhitespaceSplit) drop.
func withoutSpaces(s string) string {
	return strings.NewReplacer("▁", "", " ", "").Replace(s)
}
