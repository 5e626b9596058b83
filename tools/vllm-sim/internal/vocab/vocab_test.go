package vocab

import (
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/hermod/hermod/libs/tokenizer"
)

func encode(s string) []uint32 { return tokenizer.Builtin{}.Encode(nil, s) }

// Text a table has learned decodes back to itself, whatever its pieces:
// words cut at 4 bytes, a space joining the word after it, punctuation,
// runs of spaces, newlines, non-ASCII runes, special tokens.
func TestRoundTrip(t *testing.T) {
	texts := []string{
		"hello world",
		"The quick brown fox jumps over the lazy dog, twice!",
		"  two  spaces\tand a tab\nand lines\n\n",
		"naïve café — 日本語 😀 emoji",
		"<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>",
		"<|not special", "<||>", "a<|b|>c",
		"x", " ", "",
		"invalid \xff\xfe utf-8",
		strings.Repeat("abcdefgh ", 50),
	}
	var tab Table
	for _, s := range texts {
		ids := encode(s)
		tab.Learn(s, ids)
		if got := string(tab.AppendText(nil, ids)); got != s {
			t.Errorf("%q decodes to %q", s, got)
		}
	}
}

// Ids not learned decode to a placeholder that is one token; bytes always
// decode.
func TestUnknownIDs(t *testing.T) {
	var tab Table
	ids := encode("abcdefgh") // "abcd", "efgh"
	got := string(tab.AppendText(nil, append([]uint32{'A', ' '}, ids...)))
	want := "A <|id_" + itoa(ids[0]) + "|><|id_" + itoa(ids[1]) + "|>"
	if got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if n := len(encode(got)); n != 4 {
		t.Errorf("the placeholder text is %d tokens, want 4", n)
	}
	if _, ok := tab.Piece(tokenizer.BuiltinVocabSize); ok {
		t.Error("an id out of the vocabulary has a piece")
	}
}

func itoa(id uint32) string { return strconv.FormatUint(uint64(id), 10) }

// Ids that are not the text's encoding teach nothing past the first that
// does not fit.
func TestLearnStopsOnMismatch(t *testing.T) {
	var tab Table
	good, other := encode("abcdefgh"), encode("ijklmnop")
	tab.Learn("abcdefgh", append(slices.Clone(other), good...))
	for _, id := range append(other, good...) {
		if p, ok := tab.Piece(id); ok && id >= 256 {
			t.Errorf("learned %q for %d from a mismatched encoding", p, id)
		}
	}
	tab.Learn("abcdefgh", good)
	if got := string(tab.AppendText(nil, good)); got != "abcdefgh" {
		t.Errorf("got %q", got)
	}
}

// Learning from many goroutines at once is safe (run with -race).
func TestConcurrentLearn(t *testing.T) {
	var tab Table
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				s := strings.Repeat(string(rune('a'+(g+i)%26)), 1+i%9) + " tail"
				tab.Learn(s, encode(s))
				if got := string(tab.AppendText(nil, encode(s))); got != s {
					t.Errorf("%q decodes to %q", s, got)
					return
				}
			}
		})
	}
	wg.Wait()
}

var benchText = strings.Repeat("The simulator learns the pieces of every prompt it tokenizes, once. ", 64)

// BenchmarkLearnKnown is the cost on a prompt whose pieces are known (the
// common case on the request path).
func BenchmarkLearnKnown(b *testing.B) {
	var tab Table
	ids := encode(benchText)
	tab.Learn(benchText, ids)
	b.SetBytes(int64(len(benchText)))
	for b.Loop() {
		tab.Learn(benchText, ids)
	}
}

// BenchmarkLearnNew is the cost on a prompt none of whose pieces is known.
func BenchmarkLearnNew(b *testing.B) {
	ids := encode(benchText)
	b.SetBytes(int64(len(benchText)))
	for b.Loop() {
		b.StopTimer()
		tab := new(Table)
		b.StartTimer()
		tab.Learn(benchText, ids)
	}
}

// Split cuts a text into its tokens' pieces, one per id, learned or not;
// each piece alone is its token.
func TestSplit(t *testing.T) {
	var tab Table
	for _, s := range []string{
		`[{"name": "get_weather", "parameters": {"city": "naïve 日本"}}]`,
		"<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>",
		"x",
	} {
		ids := encode(s)
		pieces := tab.Split(nil, s, ids)
		if len(pieces) != len(ids) || strings.Join(pieces, "") != s {
			t.Errorf("%q: pieces %q for %d ids", s, pieces, len(ids))
			continue
		}
		for i, p := range pieces {
			if got := encode(p); len(got) != 1 || got[0] != ids[i] {
				t.Errorf("%q: piece %q encodes to %v, not id %d", s, p, got, ids[i])
			}
		}
	}
}
