// Package yamlstream splits a multi-document YAML stream into its
// documents, each with the line it starts on, so that the errors of a
// document's parser can name lines of the stream (ShiftLines).
package yamlstream

import (
	"bytes"
	"regexp"
	"strconv"
)

// Document is one document of a stream: its text and the line it starts
// on (from 1) in the stream.
type Document struct {
	Text []byte
	Line int
}

// Split splits a stream on "---" lines (followed by nothing, blanks or a
// comment; other text after "--- " starts the next document) and on "..."
// end lines. These markers are always at column 0, so this is exact even
// for block scalars, which are indented.
func Split(data []byte) []Document {
	var docs []Document
	cur := Document{Line: 1}
	lineNo := 0
	for len(data) > 0 {
		lineNo++
		var line []byte
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i+1], data[i+1:]
		} else {
			line, data = data, nil
		}
		rest, ok := separator(line)
		if !ok {
			cur.Text = append(cur.Text, line...)
			continue
		}
		docs = append(docs, cur)
		cur = Document{Line: lineNo + 1}
		if len(rest) > 0 {
			cur = Document{Line: lineNo, Text: rest}
		}
	}
	return append(docs, cur)
}

// separator reports whether line separates documents and returns the text
// after a "--- " that starts the next document. A document end marker
// ("...") is a separator too, so that text after it is not silently
// dropped.
func separator(line []byte) ([]byte, bool) {
	if rest, ok := bytes.CutPrefix(line, []byte("...")); ok {
		trimmed := bytes.TrimSpace(rest)
		return nil, len(trimmed) == 0 || (trimmed[0] == '#' && (rest[0] == ' ' || rest[0] == '\t'))
	}
	rest, ok := bytes.CutPrefix(line, []byte("---"))
	if !ok {
		return nil, false
	}
	trimmed := bytes.TrimSpace(rest)
	if len(trimmed) == 0 || trimmed[0] == '#' {
		return nil, true
	}
	if rest[0] != ' ' && rest[0] != '\t' {
		return nil, false // "---foo" is a plain scalar, not a separator
	}
	return append(bytes.TrimRight(rest[1:], "\r\n"), '\n'), true
}

var lineRef = regexp.MustCompile(`\bline (\d+)\b`)

// ShiftLines makes the "line N" of a parser's message about a document
// that starts on line first refer to the stream.
func ShiftLines(msg string, first int) string {
	if first <= 1 {
		return msg
	}
	return lineRef.ReplaceAllStringFunc(msg, func(s string) string {
		n, err := strconv.Atoi(s[len("line "):])
		if err != nil {
			return s
		}
		return "line " + strconv.Itoa(n+first-1)
	})
}
