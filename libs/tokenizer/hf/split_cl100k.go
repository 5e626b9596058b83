package hf

// cl100kSplitter implements patternCL100K (maxDigits 3) and patternQwen2
// (maxDigits 1). The alternatives, tried in order at each position:
//
//  1. (?i:'s|'t|'re|'ve|'m|'ll|'d)  a contraction suffix
//  2. [^\r\n\p{L}\p{N}]?\p{L}+      letters, with at most one leading
//     character that is neither a newline, a letter nor a number
//  3. \p{N}{1,maxDigits}            numbers
//  4. " "?[^\s\p{L}\p{N}]+[\r\n]*   other characters (at most one leading
//     space), then newlines
//  5. \s*[\r\n]+                    whitespace up to its last newline
//  6. \s+(?!\S)                     whitespace not followed by a
//     non-whitespace character: the whole run at the end of the text,
//     else the run less its last character (which then leads the next
//     piece)
//  7. \s+                           a lone whitespace character
type cl100kSplitter struct {
	maxDigits int
}

func (p cl100kSplitter) next(s string) int {
	if n := contraction(s, true); n > 0 {
		return n
	}
	c, n := classAt(s)
	switch c {
	case classLetter:
		return n + runOf(s[n:], classLetter)
	case classNumber:
		return p.numbers(s)
	case classOther:
		if l := runOf(s[n:], classLetter); l > 0 {
			return n + l
		}
		return otherThenNewlines(s)
	case classSpace:
		if l := runOf(s[n:], classLetter); l > 0 {
			return n + l
		}
		if s[0] == ' ' && len(s) > 1 {
			if c2, _ := classAt(s[1:]); c2 == classOther {
				return 1 + otherThenNewlines(s[1:])
			}
		}
	}
	return whitespace(s, true)
}

// numbers returns the length of up to maxDigits \p{N} characters.
func (p cl100kSplitter) numbers(s string) int {
	i := 0
	for k := 0; k < p.maxDigits && i < len(s); k++ {
		c, n := classAt(s[i:])
		if c != classNumber {
			break
		}
		i += n
	}
	return i
}

// otherThenNewlines matches [^\s\p{L}\p{N}]+[\r\n]* at the start of s,
// which begins with a classOther character.
func otherThenNewlines(s string) int {
	i := runOf(s, classOther)
	for i < len(s) && (s[i] == '\r' || s[i] == '\n') {
		i++
	}
	return i
}

// whitespace matches the whitespace alternatives at the start of s, which
// begins with whitespace: \s*[\r\n]+ (if withNewlines), then \s+(?!\S),
// then \s+.
func whitespace(s string, withNewlines bool) int {
	end, lastStart, afterNewline := spaceRun(s)
	switch {
	case withNewlines && afterNewline > 0:
		return afterNewline
	case end == len(s):
		return end
	case lastStart > 0:
		return lastStart
	}
	return end
}
