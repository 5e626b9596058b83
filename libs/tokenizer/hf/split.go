package hf

// A splitter cuts text into the pieces a split pattern (a pre-tokenizer's
// regular expression with "Isolated" behaviour) makes: its matches, and
// the text between them (most patterns match every character, so the
// pieces are all matches).
type splitter interface {
	// next returns the byte length of the piece at the start of s
	// (len(s) > 0); it is at least 1.
	next(s string) int
}

// Split patterns this package implements by hand (Go's regexp has no
// lookahead, and a hand-written splitter is much faster).
const (
	// patternCL100K is GPT-4's cl100k_base pattern, which Llama 3 uses.
	patternCL100K = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// patternQwen2 is Qwen 2's (and Qwen 3's): cl100k with single digits.
	patternQwen2 = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// patternGPT2 is GPT-2's, the one a ByteLevel pre-tokenizer with
	// use_regex applies.
	patternGPT2 = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
)

// splitterFor returns the splitter implementing pattern, or nil.
func splitterFor(pattern string) splitter {
	switch pattern {
	case patternCL100K:
		return cl100kSplitter{maxDigits: 3}
	case patternQwen2:
		return cl100kSplitter{maxDigits: 1}
	case patternGPT2:
		return gpt2Splitter{}
	case patternO200K:
		return o200kSplitter{}
	case patternDigits3:
		return gapSplitter{matchDigits3}
	case patternCJK:
		return gapSplitter{matchCJK}
	case patternDeepSeek:
		return gapSplitter{matchDeepSeek}
	}
	return nil
}

// contraction returns the byte length of an English contraction suffix
// ('s, 't, 're, 've, 'm, 'll, 'd) at the start of s, or 0. With
// ignoreCase the letters match case-insensitively under Unicode simple
// case folding, as (?i:...) does: only 's' has a non-ASCII fold (U+017F
// LATIN SMALL LETTER LONG S).
func contraction(s string, ignoreCase bool) int {
	if len(s) < 2 || s[0] != '\'' {
		return 0
	}
	fold := func(c byte) byte {
		if ignoreCase && c >= 'A' && c <= 'Z' {
			return c + ('a' - 'A')
		}
		return c
	}
	switch fold(s[1]) {
	case 's', 't', 'm', 'd':
		return 2
	case 'r', 'v':
		if len(s) >= 3 && fold(s[2]) == 'e' {
			return 3
		}
	case 'l':
		if len(s) >= 3 && fold(s[2]) == 'l' {
			return 3
		}
	case 0xC5: // U+017F is C5 BF
		if ignoreCase && len(s) >= 3 && s[2] == 0xBF {
			return 3
		}
	}
	return 0
}
