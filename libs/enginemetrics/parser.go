package enginemetrics

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// ParseError is a syntax error in an exposition, at a line of the body.
type ParseError struct {
	// Line is the 1-based line of the body.
	Line int
	// Msg says what is wrong with it.
	Msg string
}

// Error implements error.
func (e *ParseError) Error() string {
	return fmt.Sprintf("line %d: %s", e.Line, e.Msg)
}

// Format is the exposition format of a body.
type Format uint8

// The formats Parse reads.
const (
	// FormatText is the Prometheus text format 0.0.4.
	FormatText Format = iota
	// FormatOpenMetrics is OpenMetrics 1.0 text.
	FormatOpenMetrics
)

// FormatOf returns the format of a body by its Content-Type: OpenMetrics
// for application/openmetrics-text, text for anything else (servers that
// send no or a wrong type send the text format).
func FormatOf(contentType string) Format {
	const om = "application/openmetrics-text"
	if len(contentType) >= len(om) && equalFoldASCII(contentType[:len(om)], om) {
		return FormatOpenMetrics
	}
	return FormatText
}

// Parser decodes expositions. It keeps its buffers from one body to the
// next, so a scrape loop keeps one; it is not safe for concurrent use.
type Parser struct {
	text expfmt.TextParser
	// kept is the part of the body handed to expfmt, and keptLines the
	// body's line number of each of its lines.
	kept      []byte
	keptLines []int32
	reader    bytes.Reader
	// distributions holds the bits of the wanted names the body types as
	// histograms or summaries, whose samples are not read.
	distributions uint32
}

// NewParser returns a Parser.
func NewParser() *Parser {
	return &Parser{text: expfmt.NewTextParser(model.UTF8Validation)}
}

// Parse decodes a /metrics body of the given format. A body that is not a
// valid exposition is an error wrapping a *ParseError that names the line.
func (p *Parser) Parse(body []byte, format Format) (Metrics, error) {
	if err := p.filter(body, format == FormatOpenMetrics); err != nil {
		return Metrics{}, fmt.Errorf("parse exposition: %w", err)
	}
	p.reader.Reset(p.kept)
	families, err := p.text.TextToMetricFamilies(&p.reader)
	if err != nil {
		return Metrics{}, fmt.Errorf("parse exposition: %w", p.bodyError(err))
	}
	return extract(families), nil
}

// Parse decodes a /metrics body whose Content-Type is contentType with a
// Parser of its own; see Parser.Parse.
func Parse(body []byte, contentType string) (Metrics, error) {
	return NewParser().Parse(body, FormatOf(contentType))
}

// filter checks every line of body and keeps the samples of the wanted
// names in p.kept, cut to what is read: the value, and the labels of the
// info metrics.
func (p *Parser) filter(body []byte, openMetrics bool) error {
	p.kept, p.keptLines, p.distributions = p.kept[:0], p.keptLines[:0], 0
	for n := 1; len(body) > 0; n++ {
		line := body
		if i := bytes.IndexByte(body, '\n'); i >= 0 {
			line, body = body[:i], body[i+1:]
		} else {
			body = nil
		}
		if k := len(line) - 1; k >= 0 && line[k] == '\r' {
			line = line[:k]
		}
		lexed, err := lexLine(line, openMetrics)
		if err != nil {
			return &ParseError{Line: n, Msg: err.Error()}
		}
		switch lexed.kind {
		case lineEOF:
			return nil
		case lineType:
			// Types are not handed on: every wanted family is read as
			// single values, whatever its type, except distributions.
			if w, ok := lookup(lexed.name); ok && lexed.distribution {
				p.distributions |= w.bit
			}
		case lineSample:
			w, ok := lookup(lexed.name)
			switch {
			case !ok, p.distributions&w.bit != 0:
			case w.field == fieldCacheConfig || w.field == fieldLoRAInfo:
				p.keep(n, line[:lexed.end])
			default:
				// Summed over all series: the labels are not read.
				p.keep(n, lexed.name, space, line[lexed.value:lexed.end])
			}
		}
	}
	return nil
}

var space = []byte{' '}

// lookup returns what the collector reads from a metric name, if anything.
func lookup(name []byte) (wanted, bool) {
	if len(name) == 0 || name[0] != 'v' && name[0] != 's' {
		return wanted{}, false // neither vllm: nor sglang:
	}
	w, ok := wantedNames[string(name)]
	return w, ok
}

// keep appends the concatenation of parts as the line of the kept body
// that stands for line n of the body.
func (p *Parser) keep(n int, parts ...[]byte) {
	for _, b := range parts {
		p.kept = append(p.kept, b...)
	}
	p.kept = append(p.kept, '\n')
	p.keptLines = append(p.keptLines, int32(n))
}

// bodyError turns an expfmt error about the kept lines into one about the
// body.
func (p *Parser) bodyError(err error) error {
	var pe expfmt.ParseError
	if !errors.As(err, &pe) {
		return err
	}
	line := 0
	if len(p.keptLines) > 0 {
		line = int(p.keptLines[min(max(pe.Line, 1), len(p.keptLines))-1])
	}
	return &ParseError{Line: line, Msg: pe.Msg}
}
