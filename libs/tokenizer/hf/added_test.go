package hf

import (
	"slices"
	"testing"
)

// addedDoc sets the tiny tokenizer's added tokens and drops its
// post-processor. They get the ids after the model's: tinyAddedID(i).
func addedDoc(tokens ...map[string]any) func(map[string]any) {
	return func(doc map[string]any) {
		list := make([]any, len(tokens))
		for i, tok := range tokens {
			tok["id"] = int(tinyAddedID(i))
			list[i] = tok
		}
		doc["added_tokens"] = list
		doc["post_processor"] = nil
	}
}

func TestAddedTokens(t *testing.T) {
	tok := func(content string, flags ...string) map[string]any {
		m := map[string]any{"content": content, "special": true}
		for _, f := range flags {
			m[f] = true
		}
		return m
	}
	plain := func(s string) []uint32 { return tiny(t, addedDoc()).Encode(nil, s) }
	cat := func(parts ...[]uint32) []uint32 { return slices.Concat(parts...) }
	id := func(i int) []uint32 { return []uint32{tinyAddedID(i)} }
	cases := []struct {
		name   string
		tokens []map[string]any
		text   string
		want   []uint32
		opts   []Option
	}{
		{"between text", []map[string]any{tok("<x>")}, "a<x>b", cat(plain("a"), id(0), plain("b")), nil},
		{"splits words", []map[string]any{tok("<x>")}, "the<x>the", cat(plain("the"), id(0), plain("the")), nil},
		{"adjacent", []map[string]any{tok("<x>")}, "<x><x>", cat(id(0), id(0)), nil},
		{"longest first", []map[string]any{tok("<x>"), tok("<x><y>"), tok("<x")}, "<x><y><x>", cat(id(1), id(0)), nil},
		{"leftmost first", []map[string]any{tok("ab"), tok("bcd")}, "abcd", cat(id(0), plain("cd")), nil},
		{"no lstrip", []map[string]any{tok("<x>")}, "a  <x>", cat(plain("a  "), id(0)), nil},
		{"lstrip", []map[string]any{tok("<x>", "lstrip")}, "a \t <x>b", cat(plain("a"), id(0), plain("b")), nil},
		{"lstrip stops at a token", []map[string]any{tok("<x>", "lstrip")}, "<x>  <x>", cat(id(0), id(0)), nil},
		{"rstrip", []map[string]any{tok("<x>", "rstrip")}, "a<x> \n b", cat(plain("a"), id(0), plain("b")), nil},
		{"single word alone", []map[string]any{tok("ab", "single_word")}, "x ab.", cat(plain("x "), id(0), plain(".")), nil},
		{"single word inside", []map[string]any{tok("ab", "single_word")}, "xab abx", plain("xab abx"), nil},
		{"single word after digit", []map[string]any{tok("ab", "single_word")}, "1ab", plain("1ab"), nil},
		{"split special", []map[string]any{tok("<x>"), {"content": "<y>", "special": false}}, "<x><y>", cat(plain("<x>"), id(1)),
			[]Option{SplitSpecialTokens(true)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tk := tiny(t, addedDoc(c.tokens...), c.opts...)
			if got := tk.Encode(nil, c.text); !slices.Equal(got, c.want) {
				t.Errorf("%q: %v, want %v", c.text, got, c.want)
			}
		})
	}
}

// A normalized added token is matched in the normalized text (its content
// normalized too); one that is not is matched in the raw text.
func TestNormalizedAddedTokens(t *testing.T) {
	nfc := func(tokens ...map[string]any) *Tokenizer {
		return tiny(t, func(doc map[string]any) {
			addedDoc(tokens...)(doc)
			doc["normalizer"] = map[string]any{"type": "NFC"}
		})
	}
	plain := nfc()
	text := "cafe\u0301x!" // NFC: "caféx!"
	normalized := nfc(map[string]any{"content": "e\u0301x", "normalized": true})
	want := slices.Concat(plain.Encode(nil, "caf"), []uint32{tinyAddedID(0)}, plain.Encode(nil, "!"))
	if got := normalized.Encode(nil, text); !slices.Equal(got, want) {
		t.Errorf("normalized: %v, want %v", got, want)
	}
	raw := nfc(map[string]any{"content": "éx", "normalized": false})
	if got, want := raw.Encode(nil, text), plain.Encode(nil, text); !slices.Equal(got, want) {
		t.Errorf("not normalized: %v, want %v", got, want)
	}
	if got := raw.Encode(nil, "éx"); !slices.Equal(got, []uint32{tinyAddedID(0)}) {
		t.Errorf("not normalized, raw match: %v", got)
	}
}

// Added tokens get the ids the Hugging Face library gives them, whatever
// the file says.
func TestAddedTokenIDs(t *testing.T) {
	tok := tiny(t, func(doc map[string]any) {
		doc["post_processor"] = nil
		doc["added_tokens"] = []any{
			map[string]any{"id": 900, "content": "<a>"}, // new: the number of model tokens
			map[string]any{"id": 5, "content": "th"},    // a model token: its id
			map[string]any{"id": 901, "content": "<b>"}, // the largest added id plus one
			map[string]any{"id": 7, "content": "<a>"},   // seen: the same id
		}
	})
	size := uint32(tok.model.vocabSize())
	th := tinyID(t, tok, "th")
	want := []uint32{size, th, size + 1, size}
	if got := tok.Encode(nil, "<a>th<b><a>"); !slices.Equal(got, want) {
		t.Errorf("ids %v, want %v", got, want)
	}
	if tok.VocabSize() != int(size)+2 {
		t.Errorf("VocabSize() = %d, want %d", tok.VocabSize(), size+2)
	}
}
