package hf

import (
	"unicode"
	"unicode/utf8"
)

// DeepSeek V3 pre-tokenizes with three Split steps. Their patterns do
// not match every character: the text between two matches is a piece of
// its own (the Isolated behaviour), so each splitter returns either a
// match at the start of s or the text up to the next match.
const (
	// patternDigits3 isolates runs of up to three numbers.
	patternDigits3 = `\p{N}{1,3}`
	// patternCJK isolates runs of CJK ideographs and kana.
	patternCJK = "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+"
	// patternDeepSeek is the word pattern.
	patternDeepSeek = `[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_` + "`" + `{|}~][A-Za-z]+|[^` + "\r\n" + `\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[` + "\r\n" + `]*|\s*[` + "\r\n" + `]+|\s+(?!\S)|\s+`
)

// gapSplitter adapts a pattern that may not match at every position: a
// piece is a match at the start of s, or the text before the next match.
type gapSplitter struct {
	// match returns the length of the pattern's match at the start of
	// s (not empty), or 0.
	match func(s string) int
}

func (g gapSplitter) next(s string) int {
	if n := g.match(s); n > 0 {
		return n
	}
	i := 0
	for i < len(s) {
		_, w := utf8.DecodeRuneInString(s[i:])
		i += w
		if i < len(s) && g.match(s[i:]) > 0 {
			break
		}
	}
	return i
}

// matchDigits3 matches \p{N}{1,3}.
func matchDigits3(s string) int {
	return cl100kSplitter{maxDigits: 3}.numbers(s)
}

// matchCJK matches patternCJK.
func matchCJK(s string) int {
	i := 0
	for i < len(s) {
		r, w := utf8.DecodeRuneInString(s[i:])
		if !isCJK(r) {
			break
		}
		i += w
	}
	return i
}

func isCJK(r rune) bool {
	return r >= 0x4e00 && r <= 0x9fa5 || r >= 0x3040 && r <= 0x309f || r >= 0x30a0 && r <= 0x30ff
}

// Character kinds of patternDeepSeek, as bits.
const (
	dsLetterMark = 1 << iota // [\p{L}\p{M}]
	dsPunctSym               // [\p{P}\p{S}]
	dsLead                   // [^\r\n\p{L}\p{P}\p{S}]
	dsSpace                  // \s
)

func deepSeekKind(s string) (uint8, int) {
	r, w := utf8.DecodeRuneInString(s)
	if r == utf8.RuneError && w <= 1 {
		return dsLead, 1
	}
	var k uint8
	switch {
	case unicode.IsLetter(r):
		return dsLetterMark, w
	case unicode.IsPunct(r) || unicode.IsSymbol(r):
		return dsPunctSym, w
	case unicode.IsMark(r):
		k = dsLetterMark
	}
	if r != '\r' && r != '\n' {
		k |= dsLead
	}
	if unicode.IsSpace(r) {
		k |= dsSpace
	}
	return k, w
}

// deepSeekRun returns the byte length of the longest prefix of s of
// characters with a kind in mask.
func deepSeekRun(s string, mask uint8) int {
	i := 0
	for i < len(s) {
		k, w := deepSeekKind(s[i:])
		if k&mask == 0 {
			break
		}
		i += w
	}
	return i
}

// matchDeepSeek matches patternDeepSeek, trying its alternatives in
// order: ASCII punctuation then ASCII letters; a lead character then
// letters and marks; an optional space, punctuation and symbols, then
// newlines; whitespace as in cl100k.
func matchDeepSeek(s string) int {
	if len(s) > 1 && isASCIIPunct(s[0]) && isASCIILetter(s[1]) {
		i := 2
		for i < len(s) && isASCIILetter(s[i]) {
			i++
		}
		return i
	}
	k, w := deepSeekKind(s)
	if k&dsLead != 0 {
		if n := deepSeekRun(s[w:], dsLetterMark); n > 0 {
			return w + n
		}
	}
	if k&dsLetterMark != 0 {
		return deepSeekRun(s, dsLetterMark)
	}
	start := 0
	if s[0] == ' ' && len(s) > 1 {
		if k2, _ := deepSeekKind(s[1:]); k2&dsPunctSym != 0 {
			start = 1
		}
	}
	if n := deepSeekRun(s[start:], dsPunctSym); n > 0 {
		i := start + n
		for i < len(s) && (s[i] == '\r' || s[i] == '\n') {
			i++
		}
		return i
	}
	if k&dsSpace != 0 {
		return whitespace(s, true)
	}
	return 0
}

func isASCIILetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

func isASCIIPunct(c byte) bool {
	return c >= '!' && c <= '/' || c >= ':' && c <= '@' || c >= '[' && c <= '`' || c >= '{' && c <= '~'
}
