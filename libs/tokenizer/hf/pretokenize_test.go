package hf

import (
	"slices"
	"testing"
)

// A GPT-2 style ByteLevel pre-tokenizer (use_regex, add_prefix_space)
// puts a space before every stretch of text between added tokens.
func TestByteLevelPrefixSpace(t *testing.T) {
	tok := tiny(t, func(doc map[string]any) {
		doc["pre_tokenizer"] = map[string]any{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true}
		doc["post_processor"] = nil
	})
	id := func(s string) uint32 { return tinyID(t, tok, s) }
	cases := []struct {
		text string
		want []uint32
	}{
		{"the", []uint32{id(" the")}},
		{" the", []uint32{id(" the")}},
		{"the the", []uint32{id(" the"), id(" the")}},
		{"<|bos|>the<tool> the", []uint32{id("<|bos|>"), id(" the"), id("<tool>"), id(" the")}},
		{"", nil},
	}
	for _, c := range cases {
		if got := tok.Encode(nil, c.text); !slices.Equal(got, c.want) {
			t.Errorf("%q: %v, want %v", c.text, got, c.want)
		}
	}
}

func TestNormalizers(t *testing.T) {
	for _, c := range []struct {
		normalizer any
		in, want   string
	}{
		{nil, "e\u0301", "e\u0301"},
		{map[string]any{"type": "NFC"}, "e\u0301 \u212b", "é Å"},
		{map[string]any{"type": "NFD"}, "é", "e\u0301"},
		{map[string]any{"type": "NFKC"}, "ﬁ①", "fi1"},
		{map[string]any{"type": "NFKD"}, "ﬁé", "fie\u0301"},
		{map[string]any{"type": "Sequence", "normalizers": []any{map[string]any{"type": "NFD"}, map[string]any{"type": "NFC"}}}, "e\u0301", "é"},
	} {
		tok := tiny(t, func(doc map[string]any) { doc["normalizer"] = c.normalizer })
		got, err := tok.Decode(tok.EncodeWithSpecial(nil, c.in, false))
		if err != nil || got != c.want {
			t.Errorf("%v: %q -> %q, %v; want %q", c.normalizer, c.in, got, err, c.want)
		}
	}
}
