package hf

import (
	"unicode"
	"unicode/utf8"
)

// class is what the split patterns distinguish about a character.
type class uint8

const (
	classOther   class = iota // none of the below: punctuation, symbols, controls, invalid UTF-8
	classLetter               // \p{L}
	classNumber               // \p{N}
	classSpace                // \s other than \r and \n
	classNewline              // \r or \n
)

// asciiClass classifies ASCII bytes without a table lookup in package
// unicode.
var asciiClass = makeASCIIClass()

func makeASCIIClass() [utf8.RuneSelf]class {
	var t [utf8.RuneSelf]class
	for c := range utf8.RuneSelf {
		t[c] = classifyRune(rune(c))
	}
	return t
}

// classifyRune classifies r the way Oniguruma (which the Hugging Face
// tokenizers library runs the split patterns with) does: \s is Unicode
// White_Space, \p{L} and \p{N} are the general categories.
func classifyRune(r rune) class {
	switch {
	case r == '\r' || r == '\n':
		return classNewline
	case unicode.IsSpace(r):
		return classSpace
	case unicode.IsLetter(r):
		return classLetter
	case unicode.IsNumber(r):
		return classNumber
	}
	return classOther
}

// classAt returns the class and the byte length of the character at the
// start of s (len(s) > 0). An invalid UTF-8 byte is a one-byte
// classOther character.
func classAt(s string) (class, int) {
	if c := s[0]; c < utf8.RuneSelf {
		return asciiClass[c], 1
	}
	r, n := utf8.DecodeRuneInString(s)
	if r == utf8.RuneError && n == 1 {
		return classOther, 1
	}
	return classifyRune(r), n
}

// runOf returns the byte length of the longest prefix of s whose
// characters all have class c.
func runOf(s string, c class) int {
	i := 0
	for i < len(s) {
		ci, n := classAt(s[i:])
		if ci != c {
			break
		}
		i += n
	}
	return i
}

// spaceRun returns the byte length of the longest prefix of s of
// whitespace (classSpace or classNewline), the byte offset of the start of
// its last character, and the byte offset just past its last \r or \n (0
// if it has none).
func spaceRun(s string) (end, lastStart, afterNewline int) {
	for end < len(s) {
		c, n := classAt(s[end:])
		if c != classSpace && c != classNewline {
			break
		}
		lastStart = end
		end += n
		if c == classNewline {
			afterNewline = end
		}
	}
	return end, lastStart, afterNewline
}
