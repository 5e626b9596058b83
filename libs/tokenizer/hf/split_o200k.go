package hf

import (
	"unicode"
	"unicode/utf8"
)

// patternO200K is OpenAI's o200k_base pattern, which gpt-oss uses.
const patternO200K = `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`

// o200kSplitter implements patternO200K. With U the "upper" class
// [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}], L the "lower" class
// [\p{Ll}\p{Lm}\p{Lo}\p{M}] (they share Lm, Lo and marks) and P the
// optional lead [^\r\n\p{L}\p{N}], the alternatives are tried in order:
//
//  1. P? U* L+ contraction?   a word ending in lower-case letters
//  2. P? U+ L* contraction?   a word of upper-case letters
//  3. \p{N}{1,3}
//  4. " "? [^\s\p{L}\p{N}]+ [\r\n/]*
//  5. to 7. whitespace, as in cl100k
type o200kSplitter struct{}

// Character kinds o200k distinguishes, as bits.
const (
	kindUpper   = 1 << iota // in U
	kindLower               // in L
	kindLetter              // \p{L}
	kindNumber              // \p{N}
	kindSpace               // \s
	kindNewline             // \r or \n
)

var asciiKind = func() (t [utf8.RuneSelf]uint8) {
	for c := range utf8.RuneSelf {
		t[c] = kindOfRune(rune(c))
	}
	return t
}()

func kindOfRune(r rune) uint8 {
	var k uint8
	switch {
	case r == '\r' || r == '\n':
		return kindSpace | kindNewline
	case unicode.IsSpace(r):
		return kindSpace
	case unicode.IsNumber(r):
		return kindNumber
	case unicode.IsMark(r):
		return kindUpper | kindLower
	case !unicode.IsLetter(r):
		return 0
	case unicode.In(r, unicode.Lm, unicode.Lo):
		k = kindUpper | kindLower
	case unicode.In(r, unicode.Lu, unicode.Lt):
		k = kindUpper
	default: // Ll
		k = kindLower
	}
	return k | kindLetter
}

// kindAt returns the kind and byte length of the character at the start
// of s (not empty); an invalid byte is a one-byte character of no kind.
func kindAt(s string) (uint8, int) {
	if c := s[0]; c < utf8.RuneSelf {
		return asciiKind[c], 1
	}
	r, n := utf8.DecodeRuneInString(s)
	if r == utf8.RuneError && n == 1 {
		return 0, 1
	}
	return kindOfRune(r), n
}

// kindRun returns the byte length of the longest prefix of s whose
// characters all have a kind in mask, and the offset of the last
// character of it that has a kind in also (-1 if none).
func kindRun(s string, mask, also uint8) (n, lastAlso int) {
	lastAlso = -1
	for n < len(s) {
		k, w := kindAt(s[n:])
		if k&mask == 0 {
			break
		}
		if k&also != 0 {
			lastAlso = n + w
		}
		n += w
	}
	return n, lastAlso
}

func (o200kSplitter) next(s string) int {
	k, n := kindAt(s)
	lead := k&(kindLetter|kindNumber|kindNewline) == 0 && n < len(s) // may be P
	for _, word := range [2]func(string) int{o200kLower, o200kUpper} {
		if lead {
			if m := word(s[n:]); m > 0 {
				return n + m
			}
		}
		if m := word(s); m > 0 {
			return m
		}
	}
	switch {
	case k&kindNumber != 0:
		return cl100kSplitter{maxDigits: 3}.numbers(s)
	case s[0] == ' ' && len(s) > 1:
		if k2, _ := kindAt(s[1:]); k2&(kindSpace|kindLetter|kindNumber) == 0 {
			return 1 + o200kOther(s[1:])
		}
	case k&kindSpace == 0:
		return o200kOther(s)
	}
	return whitespace(s, true)
}

// o200kLower matches U* L+ contraction? at the start of s, and returns
// its length or 0.
func o200kLower(s string) int {
	upper, lastLower := kindRun(s, kindUpper, kindLower)
	lower, _ := kindRun(s[upper:], kindLower, 0)
	var n int
	switch {
	case lower > 0: // U* takes the whole upper run
		n = upper + lower
	case lastLower > 0: // U* gives back up to its last lower character
		n = lastLower
	default:
		return 0
	}
	return n + contraction(s[n:], true)
}

// o200kUpper matches U+ L* contraction? at the start of s, and returns
// its length or 0.
func o200kUpper(s string) int {
	upper, _ := kindRun(s, kindUpper, 0)
	if upper == 0 {
		return 0
	}
	n := upper
	lower, _ := kindRun(s[n:], kindLower, 0)
	n += lower
	return n + contraction(s[n:], true)
}

// o200kOther matches [^\s\p{L}\p{N}]+[\r\n/]* at the start of s, which
// begins with such a character.
func o200kOther(s string) int {
	i := 0
	for i < len(s) {
		k, w := kindAt(s[i:])
		if k&(kindSpace|kindLetter|kindNumber) != 0 {
			break
		}
		i += w
	}
	for i < len(s) && (s[i] == '\r' || s[i] == '\n' || s[i] == '/') {
		i++
	}
	return i
}
