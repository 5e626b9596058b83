package hf

import (
	"slices"
	"strings"
	"testing"
)

func splitAll(s splitter, text string) []string {
	var out []string
	for text != "" {
		n := s.next(text)
		out = append(out, text[:n])
		text = text[n:]
	}
	return out
}

func TestSplitCL100K(t *testing.T) {
	llama, qwen := splitterFor(patternCL100K), splitterFor(patternQwen2)
	cases := []struct {
		text string
		want []string
		qwen []string // if different for Qwen (single digits)
	}{
		{"Hello world", []string{"Hello", " world"}, nil},
		{"  hello", []string{" ", " hello"}, nil}, // \s+(?!\S) leaves the last space to the word
		{"a   b", []string{"a", "  ", " b"}, nil},
		{"a \t\n b", []string{"a", " \t\n", " b"}, nil}, // \s*[\r\n]+ takes up to the last newline
		{"x\n\n\ny", []string{"x", "\n\n\n", "y"}, nil}, //
		{"x \n \n  y", []string{"x", " \n \n", " ", " y"}, nil},
		{"end  ", []string{"end", "  "}, nil}, // at the end, the whole run
		{"a  1", []string{"a", " ", " ", "1"}, nil},
		{"\thello", []string{"\thello"}, nil}, // one non-newline leads letters
		{"\nhello", []string{"\n", "hello"}, nil},
		{"(hello)", []string{"(hello", ")"}, nil},
		{"!!hello", []string{"!!", "hello"}, nil},
		{" !!!\n\nx", []string{" !!!\n\n", "x"}, nil},
		{"a-b", []string{"a", "-b"}, nil},
		{"1234567", []string{"123", "456", "7"}, []string{"1", "2", "3", "4", "5", "6", "7"}},
		{" 12", []string{" ", "12"}, []string{" ", "1", "2"}},
		{"x½²", []string{"x", "½²"}, []string{"x", "½", "²"}},
		{"I'm", []string{"I", "'m"}, nil},
		{"YOU'RE", []string{"YOU", "'RE"}, nil},
		{"she'Ll", []string{"she", "'Ll"}, nil},
		{"'sup", []string{"'s", "up"}, nil},
		{"it'ſx", []string{"it", "'ſ", "x"}, nil},
		{"'x", []string{"'x"}, nil},
		{"don't", []string{"don", "'t"}, nil},
		{"中文 text", []string{"中文", " text"}, nil},
		{"🙂🙂 ok", []string{"🙂🙂", " ok"}, nil},
		{"a\u00a0b", []string{"a", "\u00a0b"}, nil},
		{"a\u3000\u3000b", []string{"a", "\u3000", "\u3000b"}, nil},
		{"\xff\xfeab", []string{"\xff\xfe", "ab"}, nil},
		{"\xffab", []string{"\xffab"}, nil},
		{"é", []string{"é"}, nil},
		{"e\u0301", []string{"e", "\u0301"}, nil}, // a combining mark is neither \p{L} nor \p{N}
		{"\r\n\r\n", []string{"\r\n\r\n"}, nil},
	}
	for _, c := range cases {
		if got := splitAll(llama, c.text); !slices.Equal(got, c.want) {
			t.Errorf("llama3 %q: %q, want %q", c.text, got, c.want)
		}
		want := c.want
		if c.qwen != nil {
			want = c.qwen
		}
		if got := splitAll(qwen, c.text); !slices.Equal(got, want) {
			t.Errorf("qwen %q: %q, want %q", c.text, got, want)
		}
	}
}

func TestSplitGPT2(t *testing.T) {
	gpt2 := splitterFor(patternGPT2)
	cases := []struct {
		text string
		want []string
	}{
		{"Hello world", []string{"Hello", " world"}},
		{"  hello", []string{" ", " hello"}},
		{"a\n\nb", []string{"a", "\n", "\n", "b"}}, // no leading character for letters
		{"I'M", []string{"I", "'", "M"}},           // case-sensitive contractions
		{"I'm", []string{"I", "'m"}},
		{" 12345", []string{" 12345"}},
		{" !!", []string{" !!"}},
		{"end  ", []string{"end", "  "}},
		{"\tx", []string{"\t", "x"}},
	}
	for _, c := range cases {
		if got := splitAll(gpt2, c.text); !slices.Equal(got, c.want) {
			t.Errorf("%q: %q, want %q", c.text, got, c.want)
		}
	}
}

func TestSplitterFor(t *testing.T) {
	if splitterFor(patternCL100K) == nil || splitterFor(patternQwen2) == nil || splitterFor(patternGPT2) == nil {
		t.Fatal("a known pattern is not recognised")
	}
	if splitterFor(strings.Replace(patternCL100K, "{1,3}", "{1,4}", 1)) != nil {
		t.Error("an unknown pattern is recognised")
	}
}

// FuzzSplit checks that the pieces tile the text and are never empty.
func FuzzSplit(f *testing.F) {
	for _, s := range []string{"Hello,  world!\n\n", "it's 12345 ok", " \t\r\n x", "中文🙂é\xff"} {
		f.Add(s)
	}
	splitters := []splitter{splitterFor(patternCL100K), splitterFor(patternQwen2), splitterFor(patternGPT2)}
	f.Fuzz(func(t *testing.T, text string) {
		for _, s := range splitters {
			pieces := splitAll(s, text)
			if strings.Join(pieces, "") != text {
				t.Fatalf("%T: pieces %q do not tile %q", s, pieces, text)
			}
			for _, p := range pieces {
				if p == "" {
					t.Fatalf("%T: empty piece in %q", s, text)
				}
			}
		}
	})
}

func TestSplitO200KAndDeepSeek(t *testing.T) {
	cases := []struct {
		pattern string
		text    string
		want    []string
	}{
		{patternO200K, "Hello world", []string{"Hello", " world"}},
		{patternO200K, "HELLOworld HELLO World", []string{"HELLOworld", " HELLO", " World"}},
		{patternO200K, "don't DON'T", []string{"don't", " DON'T"}},
		{patternO200K, "1234567", []string{"123", "456", "7"}},
		{patternO200K, " !!!\n/x", []string{" !!!\n/", "x"}},
		{patternO200K, "a/b", []string{"a", "/b"}},
		{patternO200K, "x  y\n\n z", []string{"x", " ", " y", "\n\n", " z"}},
		{patternO200K, "e\u0301", []string{"e\u0301"}},
		// U* L+ (alternative 1, without the lead) ends at the mark, before
		// U+ L* (alternative 2, with it) is tried.
		{patternO200K, "\u0301ABC", []string{"\u0301", "ABC"}},
		{patternDeepSeek, "Hello world", []string{"Hello", " world"}},
		{patternDeepSeek, "(hello ((hello «hello»", []string{"(hello", " ((", "hello", " «", "hello", "»"}},
		{patternDeepSeek, "123abc", []string{"12", "3abc"}}, // no match at "1" or "2": the gap is a piece
		{patternDeepSeek, "a\x00b", []string{"a", "\x00b"}},
		{patternDeepSeek, "x \n\n y", []string{"x", " \n\n", " y"}},
		{patternDigits3, "ab1234cd", []string{"ab", "123", "4", "cd"}},
		{patternCJK, "hi中文ok, ひらがなカタカナ!", []string{"hi", "中文", "ok, ", "ひらがなカタカナ", "!"}},
	}
	for _, c := range cases {
		s := splitterFor(c.pattern)
		if s == nil {
			t.Fatalf("no splitter for %q", c.pattern)
		}
		if got := splitAll(s, c.text); !slices.Equal(got, c.want) {
			t.Errorf("%q: %q, want %q", c.text, got, c.want)
		}
	}
}
