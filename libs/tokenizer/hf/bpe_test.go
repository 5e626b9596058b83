package hf

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func TestBPEMerges(t *testing.T) {
	tok := tiny(t, nil)
	id := func(s string) uint32 { return tinyID(t, tok, s) }
	cases := []struct {
		word string
		want []uint32
	}{
		{"the", []uint32{id("the")}},
		{" the", []uint32{id(" the")}},
		{"there", []uint32{id("the"), id("r"), id("e")}}, // "th" (rank 0) before "er" (rank 8)
		{"aaa", []uint32{id("aa"), id("a")}},             // leftmost first among equal ranks
		{"aaaaa", []uint32{id("aaaa"), id("a")}},
		{"aaaaaaaa", []uint32{id("aaaa"), id("aaaa")}},
		{"中", []uint32{id("中")}},
		{"x", []uint32{'x'}},
	}
	for _, c := range cases {
		sc := new(scratch)
		if got := tok.model.encodeWord(nil, c.word, sc); !slices.Equal(got, c.want) {
			t.Errorf("%q: %v, want %v", c.word, got, c.want)
		}
	}
}

// The two merge loops (rescan for short words, heap for long ones) agree.
func TestBPEScanMatchesHeap(t *testing.T) {
	tok := tiny(t, nil)
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"a", "t", "h", "e", " ", "i", "n", "g", "d", "r", "\n", "中", "1", "2", "3", "'", "s"}
	sc := new(scratch)
	for range 5000 {
		var b strings.Builder
		for range 1 + rng.IntN(40) {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		word := b.String()
		scan := tok.model.(*bpe).mergeScan(nil, word, sc)
		heap := tok.model.(*bpe).mergeHeap(nil, word, sc)
		if !slices.Equal(scan, heap) {
			t.Fatalf("%q: scan %v, heap %v", word, scan, heap)
		}
	}
}

// With ignore_merges a word that is a token is that token, even where the
// merges would not produce it.
func TestIgnoreMerges(t *testing.T) {
	addToken := func(ignore bool) func(map[string]any) {
		return func(doc map[string]any) {
			m := doc["model"].(map[string]any)
			vocab := m["vocab"].(map[string]int)
			vocab["hex"] = 1000 // no merges make "hex"
			m["ignore_merges"] = ignore
			doc["post_processor"] = nil
		}
	}
	if got := tiny(t, addToken(true)).Encode(nil, "hex"); !slices.Equal(got, []uint32{1000}) {
		t.Errorf("ignore_merges: %v", got)
	}
	if got := tiny(t, addToken(false)).Encode(nil, "hex"); !slices.Equal(got, []uint32{'h', 'e', 'x'}) {
		t.Errorf("without ignore_merges: %v", got)
	}
}

// Encoding a word a second time (from the cache) gives the same ids, and
// the cache keeps no reference to the caller's buffer.
func TestWordCache(t *testing.T) {
	tok := tiny(t, nil, AddSpecialTokens(false))
	text := "the thing and the other thing"
	first := tok.Encode(nil, text)
	for range 3 {
		buf := tok.Encode(make([]uint32, 0, 64), text)
		if !slices.Equal(buf, first) {
			t.Fatalf("second encoding %v, first %v", buf, first)
		}
		for i := range buf {
			buf[i] = 0 // must not reach the cache
		}
	}
	// A full shard is emptied, and words keep encoding right.
	for i := range cacheShards * cacheShardWords * 2 {
		tok.Encode(nil, strings.Repeat("a", 2+i%60)+"the")
	}
	if got := tok.Encode(nil, text); !slices.Equal(got, first) {
		t.Fatalf("after filling the cache %v, want %v", got, first)
	}
}
