package hf

// gpt2Splitter implements patternGPT2:
//
//	's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//
// Contractions are case-sensitive; a single ASCII space may lead a run of
// letters, of numbers or of other characters.
type gpt2Splitter struct{}

func (gpt2Splitter) next(s string) int {
	if n := contraction(s, false); n > 0 {
		return n
	}
	lead := 0
	if s[0] == ' ' && len(s) > 1 {
		if c, _ := classAt(s[1:]); c != classSpace && c != classNewline {
			lead = 1
		}
	}
	c, _ := classAt(s[lead:])
	if c == classSpace || c == classNewline {
		return whitespace(s, false)
	}
	return lead + runOf(s[lead:], c)
}
