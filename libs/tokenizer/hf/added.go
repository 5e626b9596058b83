package hf

import (
	"unicode"
	"unicode/utf8"
)

// addedToken is an entry of added_tokens: a string that is cut out of the
// text before pre-tokenization and becomes one id.
type addedToken struct {
	id         uint32
	content    string
	special    bool
	singleWord bool // only matches where it is not inside a word
	lstrip     bool // takes the whitespace before it
	rstrip     bool // takes the whitespace after it
}

// addedMatcher finds added tokens in text: at the leftmost position where
// one matches, the longest one (Aho-Corasick leftmost-longest, as in the
// Hugging Face library). It is a byte trie.
type addedMatcher struct {
	tokens []addedToken
	first  [256]bool        // bytes an added token starts with
	edges  map[uint64]int32 // node<<8 | byte -> child node
	term   []int32          // node -> index in tokens, or -1
	// skipSpecial makes special tokens plain text (split_special_tokens).
	// They are still matched, so they still hide what overlaps them.
	skipSpecial bool
}

func newAddedMatcher(tokens []addedToken, skipSpecial bool) *addedMatcher {
	m := &addedMatcher{tokens: tokens, edges: make(map[uint64]int32), term: []int32{-1}, skipSpecial: skipSpecial}
	for i, t := range tokens {
		m.first[t.content[0]] = true
		node := int32(0)
		for k := range len(t.content) {
			key := uint64(node)<<8 | uint64(t.content[k])
			child, ok := m.edges[key]
			if !ok {
				child = int32(len(m.term))
				m.term = append(m.term, -1)
				m.edges[key] = child
			}
			node = child
		}
		m.term[node] = int32(i) // a later duplicate wins
	}
	return m
}

func (m *addedMatcher) empty() bool { return m == nil || len(m.tokens) == 0 }

// longest returns the index of the longest token at the start of s and its
// length, or -1.
func (m *addedMatcher) longest(s string) (tok, n int) {
	tok, node := -1, int32(0)
	for i := range len(s) {
		child, ok := m.edges[uint64(node)<<8|uint64(s[i])]
		if !ok {
			break
		}
		node = child
		if t := m.term[node]; t >= 0 {
			tok, n = int(t), i+1
		}
	}
	return tok, n
}

// next finds the first added token in s at or after done (the end of the
// previous one) and returns its id and the span it takes, which includes
// the whitespace it strips. A match that is not taken (a special token
// with skipSpecial, a single_word token inside a word) still consumes its
// bytes, as in the Hugging Face library.
func (m *addedMatcher) next(s string, done int) (start, stop int, id uint32, ok bool) {
	if m.empty() {
		return 0, 0, 0, false
	}
	for i := done; i < len(s); {
		if !m.first[s[i]] {
			i++
			continue
		}
		tok, n := m.longest(s[i:])
		if tok < 0 {
			i++
			continue
		}
		t := &m.tokens[tok]
		start, stop = i, i+n
		i = stop
		if m.skipSpecial && t.special {
			continue
		}
		if t.singleWord && (endsWithWordChar(s[:start]) || startsWithWordChar(s[stop:])) {
			continue
		}
		if t.lstrip {
			start = max(start-trailingSpace(s[:start]), done)
		}
		if t.rstrip {
			stop += leadingSpace(s[stop:])
		}
		return start, stop, t.id, true
	}
	return 0, 0, 0, false
}

// isWordChar is \w of the regex crate (Unicode): letters, marks, decimal
// digits, connector punctuation and the joiners.
func isWordChar(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsMark(r) || unicode.Is(unicode.Nd, r) ||
		unicode.Is(unicode.Pc, r) || r == '\u200c' || r == '\u200d'
}

func endsWithWordChar(s string) bool {
	r, n := utf8.DecodeLastRuneInString(s)
	return n > 0 && isWordChar(r)
}

func startsWithWordChar(s string) bool {
	r, n := utf8.DecodeRuneInString(s)
	return n > 0 && isWordChar(r)
}

// trailingSpace returns the byte length of the whitespace s ends with.
func trailingSpace(s string) int {
	i := len(s)
	for i > 0 {
		r, n := utf8.DecodeLastRuneInString(s[:i])
		if !unicode.IsSpace(r) {
			break
		}
		i -= n
	}
	return len(s) - i
}

// leadingSpace returns the byte length of the whitespace s starts with.
func leadingSpace(s string) int {
	i := 0
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if !unicode.IsSpace(r) {
			break
		}
		i += n
	}
	return i
}
