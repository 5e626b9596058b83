package chattemplate

import (
	"strings"

	"github.com/nikolalohinski/gonja/v2/exec"
)

// gonja parses Jinja's conditional expression "a if c else b" only as the
// whole of an expression, not inside parentheses, where templates such as
// Gemma 3's write it: {{ x + (y if loop.first else "") }}. rewriteInlineIfs
// turns each parenthesized one into a call of inlineIfName, which gonja
// parses. Unlike Jinja's, the call evaluates both branches; the condition
// decides which value is used.
const inlineIfName = "__hermod_inline_if"

// inlineIf is the function the rewritten conditionals call: (c, a, b) ->
// a if c is true (in Jinja's sense), else b.
func inlineIf(_ *exec.Evaluator, params *exec.VarArgs) *exec.Value {
	if len(params.Args) != 3 {
		return exec.AsValue(exec.ErrInvalidCall(errInlineIfArgs))
	}
	if params.Args[0].IsTrue() {
		return params.Args[1]
	}
	return params.Args[2]
}

// rewriteInlineIfs rewrites the parenthesized conditional expressions in
// the tags ({{ }} and {% %}) of a template source.
func rewriteInlineIfs(source string) string {
	var b strings.Builder
	for {
		start := tagStart(source)
		if start < 0 {
			b.WriteString(source)
			return b.String()
		}
		closer := "}}"
		if source[start+1] == '%' {
			closer = "%}"
		}
		end := indexOutsideStrings(source[start+2:], closer)
		if end < 0 {
			b.WriteString(source)
			return b.String()
		}
		end += start + 2
		b.WriteString(source[:start+2])
		b.WriteString(rewriteExpr(source[start+2 : end]))
		source = source[end:]
	}
}

// tagStart returns the offset of the first "{{" or "{%" of s, or -1.
func tagStart(s string) int {
	for i := 0; i+1 < len(s); i++ {
		if s[i] == '{' && (s[i+1] == '{' || s[i+1] == '%') {
			return i
		}
	}
	return -1
}

// rewriteExpr rewrites the grouping parentheses of expression text (not
// those of calls) that hold "a if c else b".
func rewriteExpr(e string) string {
	var b strings.Builder
	for i := 0; i < len(e); i++ {
		c := e[i]
		if c == '\'' || c == '"' {
			j := stringEnd(e, i)
			b.WriteString(e[i:j])
			i = j - 1
			continue
		}
		if c != '(' || isCall(e[:i]) {
			b.WriteByte(c)
			continue
		}
		closeAt := matchingParen(e, i)
		if closeAt < 0 {
			b.WriteString(e[i:])
			break
		}
		inner := rewriteExpr(e[i+1 : closeAt])
		if a, cond, alt, ok := splitConditional(inner); ok {
			b.WriteString(inlineIfName + "(" + cond + ", " + a + ", " + alt + ")")
		} else {
			b.WriteString("(" + inner + ")")
		}
		i = closeAt
	}
	return b.String()
}

// splitConditional splits "a if c else b" at its top-level keywords.
func splitConditional(e string) (a, cond, alt string, ok bool) {
	ifAt := keywordAt(e, "if")
	if ifAt < 0 {
		return "", "", "", false
	}
	elseAt := keywordAt(e[ifAt+2:], "else")
	if elseAt < 0 {
		return "", "", "", false
	}
	elseAt += ifAt + 2
	a, cond, alt = strings.TrimSpace(e[:ifAt]), strings.TrimSpace(e[ifAt+2:elseAt]), strings.TrimSpace(e[elseAt+4:])
	return a, cond, alt, a != "" && cond != "" && alt != ""
}

// keywordAt returns the offset of the first whole-word kw in e outside
// strings and brackets, or -1.
func keywordAt(e, kw string) int {
	depth := 0
	for i := 0; i < len(e); i++ {
		switch c := e[i]; {
		case c == '\'' || c == '"':
			i = stringEnd(e, i) - 1
		case c == '(' || c == '[' || c == '{':
			depth++
		case c == ')' || c == ']' || c == '}':
			depth--
		case depth == 0 && strings.HasPrefix(e[i:], kw) &&
			(i == 0 || !isIdentByte(e[i-1])) && (i+len(kw) == len(e) || !isIdentByte(e[i+len(kw)])):
			return i
		}
	}
	return -1
}

// matchingParen returns the offset of the ")" closing the "(" at open, or
// -1.
func matchingParen(e string, open int) int {
	depth := 0
	for i := open; i < len(e); i++ {
		switch e[i] {
		case '\'', '"':
			i = stringEnd(e, i) - 1
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 {
				return i
			}
		}
	}
	return -1
}

// indexOutsideStrings returns the offset of the first sub in s that is
// not inside a string literal, or -1.
func indexOutsideStrings(s, sub string) int {
	for i := 0; i < len(s); i++ {
		if s[i] == '\'' || s[i] == '"' {
			i = stringEnd(s, i) - 1
			continue
		}
		if strings.HasPrefix(s[i:], sub) {
			return i
		}
	}
	return -1
}

// stringEnd returns the offset just past the string literal starting at
// s[start] (a quote), or len(s).
func stringEnd(s string, start int) int {
	q := s[start]
	for i := start + 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case q:
			return i + 1
		}
	}
	return len(s)
}

// isCall reports whether a "(" after before opens a call's arguments
// (it follows a name, a ")" or a "]").
func isCall(before string) bool {
	before = strings.TrimRight(before, " \t\r\n")
	if before == "" {
		return false
	}
	c := before[len(before)-1]
	if c == ')' || c == ']' {
		return true
	}
	if !isIdentByte(c) {
		return false
	}
	// A keyword such as "if", "and" or "in" is not a function name.
	i := len(before)
	for i > 0 && isIdentByte(before[i-1]) {
		i--
	}
	switch before[i:] {
	case "if", "elif", "else", "and", "or", "not", "in", "is", "return":
		return false
	}
	return true
}

func isIdentByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}
