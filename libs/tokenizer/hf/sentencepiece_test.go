package hf

import (
	"errors"
	"slices"
	"testing"
)

// spDoc is a small SentencePiece-style BPE tokenizer (Llama 2's layout:
// Prepend and Replace normalizers, no pre-tokenizer) with two
// byte-fallback tokens, <0xC3> and <0xA9> (the bytes of "é"), edited by
// model.
func spDoc(model map[string]any) map[string]any {
	vocab := map[string]int{"<unk>": 0, "<s>": 1, "<0xC3>": 2, "<0xA9>": 3, "▁": 4, "h": 5, "e": 6, "l": 7, "o": 8,
		"he": 9, "hel": 10, "lo": 11, "hello": 12, "▁hello": 13, "x": 14}
	m := map[string]any{"type": "BPE", "vocab": vocab, "unk_token": "<unk>", "fuse_unk": true, "byte_fallback": true,
		"merges": [][2]string{{"h", "e"}, {"he", "l"}, {"l", "o"}, {"hel", "lo"}, {"▁", "hello"}}}
	for k, v := range model {
		m[k] = v
	}
	return map[string]any{
		"added_tokens": []any{map[string]any{"id": 1, "content": "<s>", "special": true}},
		"normalizer": map[string]any{"type": "Sequence", "normalizers": []any{
			map[string]any{"type": "Prepend", "prepend": "▁"},
			map[string]any{"type": "Replace", "pattern": map[string]any{"String": " "}, "content": "▁"},
		}},
		"model": m,
	}
}

func loadDoc(tb testing.TB, doc map[string]any) *Tokenizer {
	tb.Helper()
	tok, err := Load(marshalDoc(tb, doc))
	if err != nil {
		tb.Fatal(err)
	}
	return tok
}

// The ids are the Hugging Face library's (tokenizers 0.22) for the same
// files. Unknown characters: byte fallback where every byte has a token,
// else <unk> (fused, or not, or dropped without unk_token); a pending
// <unk> comes after the byte tokens of the character that follows it, as
// the library has it.
func TestSentencePieceBPE(t *testing.T) {
	texts := []string{"hello", "é", "中", "中中", "中é", "x中中x", "hello hello", "<s>hello", " he"}
	cases := []struct {
		name  string
		model map[string]any
		want  [][]uint32
	}{
		{"fuse", nil, [][]uint32{{13}, {4, 2, 3}, {4, 0}, {4, 0}, {4, 2, 3, 0}, {4, 14, 0, 14}, {13, 13}, {1, 13}, {4, 4, 9}}},
		{"no fuse", map[string]any{"fuse_unk": false}, [][]uint32{{13}, {4, 2, 3}, {4, 0}, {4, 0, 0}, {4, 2, 3, 0}, {4, 14, 0, 0, 14}, {13, 13}, {1, 13}, {4, 4, 9}}},
		{"no unk", map[string]any{"unk_token": nil}, [][]uint32{{13}, {4, 2, 3}, {4}, {4}, {4, 2, 3}, {4, 14, 14}, {13, 13}, {1, 13}, {4, 4, 9}}},
		{"no fallback", map[string]any{"byte_fallback": false}, [][]uint32{{13}, {4, 0}, {4, 0}, {4, 0}, {4, 0}, {4, 14, 0, 14}, {13, 13}, {1, 13}, {4, 4, 9}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tok := loadDoc(t, spDoc(c.model))
			for i, text := range texts {
				if got := tok.EncodeWithSpecial(nil, text, false); !slices.Equal(got, c.want[i]) {
					t.Errorf("%q: %v, want %v", text, got, c.want[i])
				}
			}
		})
	}
	// Byte-fallback tokens decode to their bytes.
	tok := loadDoc(t, spDoc(nil))
	if s, err := tok.Decode(tok.EncodeWithSpecial(nil, "hello é", false)); err != nil || s != "▁hello▁é" {
		t.Errorf("Decode = %q, %v", s, err)
	}
}

// uniDoc is a small Unigram tokenizer with a Metaspace pre-tokenizer and
// the byte-fallback tokens of "中" only.
func uniDoc(model map[string]any) map[string]any {
	vocab := [][2]any{{"<unk>", 0.0}, {"<0xE4>", 0.0}, {"<0xB8>", 0.0}, {"<0xAD>", 0.0}, {"▁", -1.0}, {"a", -2.0}, {"b", -2.0},
		{"ab", -4.0}, {"▁a", -3.0}, {"c", -3.0}, {"abc", -7.0}, {"bc", -5.0}, {"中文", -3.0}}
	m := map[string]any{"type": "Unigram", "unk_id": 0, "vocab": vocab, "byte_fallback": true}
	for k, v := range model {
		m[k] = v
	}
	return map[string]any{
		"pre_tokenizer": map[string]any{"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": true},
		"model":         m,
	}
}

// Ids as the Hugging Face library gives them. "ab" ties ▁ ab with ▁ a b
// and ▁a b (-5 each): the first path found wins. "中x中" fuses into one
// unknown piece, which has no byte fallback because "x" has no byte token.
func TestUnigram(t *testing.T) {
	texts := []string{"ab", "abc", "a b", "中文", "中", "中x中", "xyz", "<unk>", "ba", "  a", ""}
	cases := []struct {
		name  string
		model map[string]any
		want  [][]uint32
	}{
		{"byte fallback", nil, [][]uint32{{4, 7}, {4, 10}, {8, 4, 6}, {4, 12}, {4, 1, 2, 3}, {4, 0}, {4, 0}, {4, 0}, {4, 6, 5}, {4, 8}, nil}},
		{"unk", map[string]any{"byte_fallback": false}, [][]uint32{{4, 7}, {4, 10}, {8, 4, 6}, {4, 12}, {4, 0}, {4, 0}, {4, 0}, {4, 0}, {4, 6, 5}, {4, 8}, nil}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tok := loadDoc(t, uniDoc(c.model))
			for i, text := range texts {
				if got := tok.EncodeWithSpecial(nil, text, false); !slices.Equal(got, c.want[i]) {
					t.Errorf("%q: %v, want %v", text, got, c.want[i])
				}
			}
			if tok.VocabSize() != 13 {
				t.Errorf("VocabSize() = %d", tok.VocabSize())
			}
		})
	}
}

func TestUnigramLoadErrors(t *testing.T) {
	for _, c := range []struct {
		name  string
		model map[string]any
		field string
	}{
		{"no unk id", map[string]any{"unk_id": nil}, "model.unk_id"},
		{"unk id too large", map[string]any{"unk_id": 13}, "model.unk_id"},
		{"empty vocab", map[string]any{"vocab": []any{}}, "model.vocab"},
		{"bad entry", map[string]any{"vocab": []any{[]any{"a"}}}, "model.vocab"},
		{"bad score", map[string]any{"vocab": []any{[]any{"a", "high"}}}, "model.vocab"},
	} {
		_, err := Load(marshalDoc(t, uniDoc(c.model)))
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != c.field {
			t.Errorf("%s: err = %v, want a FieldError for %s", c.name, err, c.field)
		}
	}
}

// The Split behaviours, on the Hugging Face documentation's example.
func TestSplitBehaviors(t *testing.T) {
	const text = "the-final--countdown"
	for _, c := range []struct {
		behavior string
		want     []string
	}{
		{"Removed", []string{"the", "final", "countdown"}},
		{"Isolated", []string{"the", "-", "final", "-", "-", "countdown"}},
		{"MergedWithPrevious", []string{"the-", "final-", "-", "countdown"}},
		{"MergedWithNext", []string{"the", "-final", "-", "-countdown"}},
		{"Contiguous", []string{"the", "-", "final", "--", "countdown"}},
	} {
		pre, err := loadPreTokenizer(marshalDoc(t, map[string]any{"type": "Split", "pattern": map[string]any{"String": "-"}, "behavior": c.behavior}))
		if err != nil {
			t.Fatal(err)
		}
		if got := preWords(pre, text, true); !slices.Equal(got, c.want) {
			t.Errorf("%s: %q, want %q", c.behavior, got, c.want)
		}
	}
}

func TestMetaspace(t *testing.T) {
	ms := func(scheme string, split bool) map[string]any {
		return map[string]any{"type": "Metaspace", "replacement": "▁", "prepend_scheme": scheme, "split": split}
	}
	for _, c := range []struct {
		pre     map[string]any
		text    string
		atStart bool
		want    []string
	}{
		{ms("always", true), "Hey   friend!", true, []string{"▁Hey", "▁", "▁", "▁friend!"}},
		{ms("always", true), "Hey", false, []string{"▁Hey"}},
		{ms("always", true), " Hey", false, []string{"▁Hey"}},
		{ms("first", true), "Hey you", false, []string{"Hey", "▁you"}},
		{ms("first", true), "Hey you", true, []string{"▁Hey", "▁you"}},
		{ms("never", true), "a b  ", true, []string{"a", "▁b", "▁", "▁"}},
		{ms("always", false), "Hey you", false, []string{"▁Hey▁you"}},
		{map[string]any{"type": "Metaspace", "replacement": "▁", "add_prefix_space": false}, "a b", true, []string{"a", "▁b"}},
		{map[string]any{"type": "Metaspace", "replacement": "_", "add_prefix_space": true}, "a b", true, []string{"_a", "_b"}},
		{map[string]any{"type": "Sequence", "pretokenizers": []any{map[string]any{"type": "WhitespaceSplit"}, ms("first", false)}},
			"a  b\tc", true, []string{"▁a", "b", "c"}},
		{map[string]any{"type": "Sequence", "pretokenizers": []any{map[string]any{"type": "WhitespaceSplit"}, ms("first", false)}},
			" a b", true, []string{"a", "b"}}, // "a" does not start the input
	} {
		pre, err := loadPreTokenizer(marshalDoc(t, c.pre))
		if err != nil {
			t.Fatal(err)
		}
		if got := preWords(pre, c.text, c.atStart); !slices.Equal(got, c.want) {
			t.Errorf("%v %q (start %v): %q, want %q", c.pre, c.text, c.atStart, got, c.want)
		}
	}
}

// preWords returns the words pre makes of s.
func preWords(pre *preTokenizer, s string, atStart bool) []string {
	var words []string
	tok := &Tokenizer{model: wordRecorder{&words}}
	pre.words(s, atStart, &encoder{t: tok, sc: new(scratch)})
	return words
}

// wordRecorder is a model that records the words it is given.
type wordRecorder struct{ words *[]string }

func (w wordRecorder) encodeWord(dst []uint32, word string, _ *scratch) []uint32 {
	*w.words = append(*w.words, word)
	return dst
}

func (wordRecorder) tokenID(string) (uint32, bool) { return 0, false }

func (wordRecorder) vocabSize() int { return 0 }
