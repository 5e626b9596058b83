package enginemetrics

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// lineKind classifies one line of an exposition.
type lineKind uint8

const (
	lineSkip   lineKind = iota // blank, a comment, or metadata without a name
	lineHelp                   // # HELP of a named family
	lineType                   // # TYPE of a named family
	lineSample                 // a sample
	lineEOF                    // OpenMetrics "# EOF"
)

// lexedLine is what lexLine found on a line.
type lexedLine struct {
	kind lineKind
	// name is the metric name of a HELP, TYPE or sample line; for a
	// quoted name, the bytes between the quotes, escapes left as they are.
	name []byte
	// value and end are the offsets of a sample's value and just past it:
	// the line up to end is the sample without timestamp and exemplar.
	value, end int
	// distribution is set on a TYPE line of a histogram or summary.
	distribution bool
}

// Syntax errors without detail (their text is all there is to say).
var (
	errNameInComment    = errors.New("invalid metric name in comment")
	errMetricName       = errors.New("invalid metric name")
	errMissingName      = errors.New("label set without a metric name")
	errTwoNames         = errors.New("more than one metric name in a label set")
	errLabelName        = errors.New("invalid label name")
	errLabelValueQuote  = errors.New("expected '\"' at start of label value")
	errLabelSetEnd      = errors.New("expected ',' or '}' in label set")
	errUnterminatedSet  = errors.New("unterminated label set")
	errUnterminatedQuot = errors.New("unterminated quoted string")
	errReservedLabel    = errors.New(`label name "__name__" is reserved`)
	errLabelValueUTF8   = errors.New("label value is not valid UTF-8")
	errNameUTF8         = errors.New("metric name is not valid UTF-8")
	errMissingValue     = errors.New("missing sample value")
	errHelpEscape       = errors.New("invalid escape sequence in HELP")
)

// lexLine checks the syntax of one line of the Prometheus text format (or,
// with openMetrics, of OpenMetrics 1.0) without allocating on success. l
// holds no newline.
//
// The grammar is that of expfmt's parser: every line expfmt accepts passes
// (FuzzParse checks it, with one exception, see quotedNamePart), and so do a
// few that it rejects for no reason that changes a value read: blanks after
// the value or timestamp, and the carriage return of a CRLF line end, which
// the caller strips.
func lexLine(l []byte, openMetrics bool) (lexedLine, error) {
	i := skipBlanks(l, 0)
	if i == len(l) {
		return lexedLine{}, nil
	}
	if l[i] == '#' {
		return lexComment(l, i+1, openMetrics)
	}
	return lexSample(l, i, openMetrics)
}

// lexComment checks a comment whose '#' ends before l[i].
func lexComment(l []byte, i int, openMetrics bool) (lexedLine, error) {
	i = skipBlanks(l, i)
	j := tokenEnd(l, i)
	keyword := l[i:j]
	if openMetrics {
		// Metadata is dropped: every family is read untyped.
		if string(keyword) == "EOF" && skipBlanks(l, j) == len(l) {
			return lexedLine{kind: lineEOF}, nil
		}
		return lexedLine{}, nil
	}
	isHelp, isType := string(keyword) == "HELP", string(keyword) == "TYPE"
	if !isHelp && !isType {
		return lexedLine{}, nil // a plain comment
	}
	i = skipBlanks(l, j)
	if i == len(l) {
		return lexedLine{}, nil
	}
	name, j, err := lexMetricName(l, i)
	switch {
	case j == len(l) && (err == nil || errors.Is(err, errMetricName) || errors.Is(err, errNameUTF8)):
		return lexedLine{}, nil // a name and nothing to say about it: not read
	case err != nil:
		return lexedLine{}, err
	case j == i, !isBlank(l[j]):
		return lexedLine{}, errNameInComment
	}
	rest := l[skipBlanks(l, j):]
	if isHelp {
		if !validEscapes(rest) {
			return lexedLine{}, errHelpEscape
		}
		return lexedLine{kind: lineHelp, name: name}, nil
	}
	if len(rest) == 0 {
		return lexedLine{}, nil // no type: the family stays untyped
	}
	scalar, ok := metricType(rest)
	if !ok {
		return lexedLine{}, fmt.Errorf("unknown metric type %q", rest)
	}
	return lexedLine{kind: lineType, name: name, distribution: !scalar}, nil
}

// lexSample checks a sample starting at l[i].
func lexSample(l []byte, i int, openMetrics bool) (lexedLine, error) {
	var name []byte
	var err error
	if l[i] == '{' {
		// {"name", label="value"}: the name is the one entry without '='.
		if name, i, err = lexLabels(l, i, true); err != nil {
			return lexedLine{}, err
		}
		if name == nil {
			return lexedLine{}, errMissingName
		}
	} else {
		start := i
		if name, i, err = lexMetricName(l, i); err != nil {
			return lexedLine{}, err
		}
		if i == start {
			return lexedLine{}, errMetricName
		}
		// As in expfmt, the value may follow the name without a blank
		// ("up+1" is up, 1).
		if i = skipBlanks(l, i); i < len(l) && l[i] == '{' {
			if _, i, err = lexLabels(l, i, false); err != nil {
				return lexedLine{}, err
			}
		}
	}
	i = skipBlanks(l, i)
	j := tokenEnd(l, i)
	if j == i {
		return lexedLine{}, errMissingValue
	}
	if _, ok := parseValue(l[i:j]); !ok {
		return lexedLine{}, fmt.Errorf("expected float as value, got %q", l[i:j])
	}
	value, end := i, j
	if err := lexSampleTail(l, skipBlanks(l, j), openMetrics); err != nil {
		return lexedLine{}, err
	}
	return lexedLine{kind: lineSample, name: name, value: value, end: end}, nil
}

// lexSampleTail checks what follows a sample's value from l[i]: an optional
// timestamp (integer milliseconds; OpenMetrics: float seconds) and, in
// OpenMetrics, an optional exemplar.
func lexSampleTail(l []byte, i int, openMetrics bool) error {
	if i == len(l) || openMetrics && l[i] == '#' {
		return nil
	}
	j := tokenEnd(l, i)
	ts := l[i:j]
	if openMetrics {
		if _, ok := parseValue(ts); !ok {
			return fmt.Errorf("expected float as timestamp, got %q", ts)
		}
	} else if _, err := strconv.ParseInt(string(ts), 10, 64); err != nil {
		return fmt.Errorf("expected integer as timestamp, got %q", ts)
	}
	if i = skipBlanks(l, j); i == len(l) || openMetrics && l[i] == '#' {
		return nil
	}
	return fmt.Errorf("unexpected text after timestamp: %q", l[i:])
}

// lexMetricName scans a metric name at l[i]: a legacy name
// [a-zA-Z_:][a-zA-Z0-9_:]* or a quoted UTF-8 name. It returns the name and
// the offset after it; next == i when l[i] starts no name.
func lexMetricName(l []byte, i int) (name []byte, next int, err error) {
	if i < len(l) && l[i] == '"' {
		return lexQuotedName(l, i)
	}
	j := i
	for j < len(l) && (isNameStart(l[j]) || l[j] == ':' || j > i && isDigit(l[j])) {
		j++
	}
	return l[i:j], j, nil
}

// lexLabelName is lexMetricName for label names ([a-zA-Z_][a-zA-Z0-9_]* or
// quoted).
func lexLabelName(l []byte, i int) (name []byte, next int, err error) {
	if i < len(l) && l[i] == '"' {
		return lexQuotedName(l, i)
	}
	j := i
	for j < len(l) && (isNameStart(l[j]) || j > i && isDigit(l[j])) {
		j++
	}
	return l[i:j], j, nil
}

// lexQuotedName scans a quoted name at l[i] == '"', which must be non-empty
// valid UTF-8; when it is not, next is still the offset after it.
func lexQuotedName(l []byte, i int) (name []byte, next int, err error) {
	j, err := scanQuoted(l, i)
	if err != nil {
		return nil, 0, err
	}
	name = l[i+1 : j-1]
	if len(name) == 0 {
		return nil, j, errMetricName
	}
	if !utf8.Valid(name) {
		return nil, j, errNameUTF8
	}
	return name, j, nil
}

// lexLabels scans a label set at l[i] == '{' and returns the offset after
// its '}'. With braceName, one entry may be a bare name (the metric name of
// the {"name", ...} form), which it returns.
func lexLabels(l []byte, i int, braceName bool) (name []byte, next int, err error) {
	i++
	for {
		if i = skipBlanks(l, i); i == len(l) {
			return nil, 0, errUnterminatedSet
		}
		if l[i] == '}' {
			return name, i + 1, nil
		}
		label, j, err := lexLabelName(l, i)
		if err != nil {
			return nil, 0, err
		}
		if j == i {
			return nil, 0, errLabelName
		}
		quoted := l[i] == '"'
		if j = skipBlanks(l, j); j < len(l) && l[j] == '=' {
			if !quoted && string(label) == "__name__" {
				return nil, 0, errReservedLabel
			}
			if j = skipBlanks(l, j+1); j == len(l) || l[j] != '"' {
				return nil, 0, errLabelValueQuote
			}
			start := j
			if j, err = scanQuoted(l, j); err != nil {
				return nil, 0, err
			}
			if !utf8.Valid(l[start:j]) {
				return nil, 0, errLabelValueUTF8
			}
		} else {
			switch {
			case !braceName:
				return nil, 0, fmt.Errorf("expected '=' after label name %q", label)
			case name != nil:
				return nil, 0, errTwoNames
			}
			name = label
		}
		if j = skipBlanks(l, j); j < len(l) && l[j] == ',' {
			i = j + 1
			continue
		}
		switch {
		case j == len(l):
			return nil, 0, errUnterminatedSet
		case l[j] == '}':
			return name, j + 1, nil
		}
		return nil, 0, errLabelSetEnd
	}
}

// scanQuoted scans a quoted string at l[i] == '"' and returns the offset
// after its closing quote. The escapes are \\, \" and \n.
func scanQuoted(l []byte, i int) (int, error) {
	for j := i + 1; j < len(l); j++ {
		switch l[j] {
		case '"':
			return j + 1, nil
		case '\\':
			j++
			if j == len(l) {
				return 0, errUnterminatedQuot
			}
			if c := l[j]; c != '\\' && c != '"' && c != 'n' {
				return 0, fmt.Errorf("invalid escape sequence '\\%c'", c)
			}
		}
	}
	return 0, errUnterminatedQuot
}

// validEscapes reports whether every backslash in s starts an escape of the
// text format: \\, \n or \".
func validEscapes(s []byte) bool {
	for j := 0; j < len(s); j++ {
		if s[j] != '\\' {
			continue
		}
		j++
		if j == len(s) {
			return false
		}
		if c := s[j]; c != '\\' && c != 'n' && c != '"' {
			return false
		}
	}
	return true
}

// metricType reports whether t names a metric type of a # TYPE line, as
// expfmt reads them (the upper case of t is a dto.MetricType name, or
// GAUGEHISTOGRAM), and whether its samples are single values (counter,
// gauge, untyped) rather than a distribution.
func metricType(t []byte) (scalar, ok bool) {
	if !ascii(t) {
		// Unicode upper-casing, as expfmt ("ſ" is "S"); never seen in
		// practice, so it may allocate.
		t = bytes.ToUpper(t)
	}
	for _, k := range [...]string{"counter", "gauge", "untyped"} {
		if equalFoldASCII(t, k) {
			return true, true
		}
	}
	for _, k := range [...]string{"histogram", "summary", "gauge_histogram", "gaugehistogram"} {
		if equalFoldASCII(t, k) {
			return false, true
		}
	}
	return false, false
}

func ascii(b []byte) bool {
	for _, c := range b {
		if c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// equalFoldASCII reports whether b equals the lower-case ASCII word k,
// ignoring the case of b.
func equalFoldASCII[T string | []byte](b T, k string) bool {
	if len(b) != len(k) {
		return false
	}
	for i := 0; i < len(b); i++ {
		if c := b[i]; c|0x20 != k[i] && c != k[i] {
			return false
		}
	}
	return true
}

// parseValue parses a sample value as expfmt does: Go float syntax without
// hexadecimal mantissas or digit separators.
func parseValue(b []byte) (float64, bool) {
	if bytes.ContainsAny(b, "pP_") {
		return 0, false
	}
	v, err := strconv.ParseFloat(string(b), 64)
	return v, err == nil
}

func skipBlanks(l []byte, i int) int {
	for i < len(l) && isBlank(l[i]) {
		i++
	}
	return i
}

// tokenEnd returns the offset of the first blank at or after i.
func tokenEnd(l []byte, i int) int {
	for i < len(l) && !isBlank(l[i]) {
		i++
	}
	return i
}

func isBlank(c byte) bool     { return c == ' ' || c == '\t' }
func isDigit(c byte) bool     { return c >= '0' && c <= '9' }
func isNameStart(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' }
