package tokenizer

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func pieces(text string) []string {
	var out []string
	forEachPiece(text, func(p string) { out = append(out, p) })
	return out
}

func TestBuiltinPieces(t *testing.T) {
	cases := []struct {
		text string
		want []string
	}{
		{"hello", []string{"hell", "o"}},
		{" hello world", []string{" hel", "lo", " wor", "ld"}},
		{"a  b", []string{"a", " ", " b"}},
		{"Hi, there!\n", []string{"Hi", ",", " the", "re", "!", "\n"}},
		{"x1234567", []string{"x123", "4567"}},
		{"<|begin_of_text|>Hello", []string{"<|begin_of_text|>", "Hell", "o"}},
		{"<|not special", []string{"<", "|", "not", " spe", "cial"}},
		{"<||>", []string{"<", "|", "|", ">"}},
		{"né 中文", []string{"n", "é", " ", "中", "文"}},
		{"bad \xff utf8", []string{"bad", " ", "\xff", " utf", "8"}},
		{"", nil},
	}
	for _, c := range cases {
		if got := pieces(c.text); !slices.Equal(got, c.want) {
			t.Errorf("%q: pieces %q, want %q", c.text, got, c.want)
		}
	}
}

func TestBuiltinIDs(t *testing.T) {
	var b Builtin
	ids := b.Encode(nil, "a, hello")
	if len(ids) != 4 || ids[0] != 'a' || ids[1] != ',' {
		t.Fatalf("ids = %v", ids)
	}
	for _, id := range ids[2:] {
		if id < 256 || id >= BuiltinVocabSize {
			t.Errorf("multi-byte piece id %d out of range", id)
		}
	}
	// Deterministic, and independent of what else is encoded.
	again := b.Encode(make([]uint32, 0, 8), "a, hello")
	if !slices.Equal(ids, again) {
		t.Errorf("ids differ between calls: %v %v", ids, again)
	}
	if b.Encode(nil, " hel")[0] == b.Encode(nil, "hel")[0] {
		t.Error("a leading space does not change the piece id")
	}
	if b.Name() != BuiltinName || b.VocabSize() != BuiltinVocabSize {
		t.Error("name or vocab size")
	}
}

// Ordinary English comes out at roughly four characters per token, the ratio
// Hermod's character-based estimates assume.
func TestBuiltinCharsPerToken(t *testing.T) {
	text := strings.Repeat("The quick brown fox jumps over the lazy dog while the scheduler routes prefill and decode requests across the cluster. ", 50)
	n := len(Builtin{}.Encode(nil, text))
	ratio := float64(len(text)) / float64(n)
	if ratio < 3 || ratio > 5 {
		t.Errorf("%.2f characters per token", ratio)
	}
}

func TestLlama3Template(t *testing.T) {
	got := Llama3Template{}.Apply([]Message{{"system", "Be brief."}, {"user", "Hi"}}, true)
	want := "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>" +
		"<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
	if got != want {
		t.Errorf("template\n got  %q\n want %q", got, want)
	}
	// a conversation's rendering is a prefix of its continuation's (what
	// makes multi-turn prefix caching work)
	short := Llama3Template{}.Apply([]Message{{"user", "Hi"}}, false)
	long := Llama3Template{}.Apply([]Message{{"user", "Hi"}, {"assistant", "Hello"}}, true)
	if !strings.HasPrefix(long, short) {
		t.Error("a conversation's rendering is not a prefix of its continuation")
	}
}

func FuzzBuiltin(f *testing.F) {
	for _, s := range []string{"hello world", "<|eot_id|>x", "a  b\n\tc", "né 中文 🙂", "\xff\xfe", "<|a|><|b", "x1234567890"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		ps := pieces(text)
		if strings.Join(ps, "") != text {
			t.Fatalf("pieces %q do not concatenate to %q", ps, text)
		}
		ids := Builtin{}.Encode(nil, text)
		if len(ids) != len(ps) {
			t.Fatalf("%d ids for %d pieces", len(ids), len(ps))
		}
		for i, id := range ids {
			if id >= BuiltinVocabSize {
				t.Fatalf("id %d out of range", id)
			}
			if len(ps[i]) > maxPieceBytes && specialLen(ps[i]) == 0 && utf8.RuneCountInString(ps[i]) > 1 {
				t.Fatalf("piece %q longer than %d bytes", ps[i], maxPieceBytes)
			}
		}
	})
}

func BenchmarkBuiltinEncode(b *testing.B) {
	text := strings.Repeat("The quick brown fox jumps over the lazy dog, 1234 times! ", 1000)
	buf := make([]uint32, 0, len(text))
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		buf = Builtin{}.Encode(buf[:0], text)
	}
}
