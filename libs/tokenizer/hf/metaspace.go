package hf

import (
	"encoding/json"
	"strings"
	"unicode"
	"unicode/utf8"
)

// metaspace is SentencePiece's whitespace handling as the Metaspace
// pre-tokenizer does it: spaces become the replacement character ("▁"),
// which is put before the text according to the prepend scheme, and (with
// split) the text is cut before every replacement character.
type metaspace struct {
	replacement string // one character
	prepend     prependScheme
	split       bool
}

type prependScheme uint8

const (
	prependAlways prependScheme = iota // before every piece not starting with it
	prependFirst                       // only before the piece that starts the input
	prependNever
)

type metaspaceJSON struct {
	Replacement    *string `json:"replacement"`
	PrependScheme  *string `json:"prepend_scheme"`
	AddPrefixSpace *bool   `json:"add_prefix_space"` // older files
	Split          *bool   `json:"split"`            // default true
}

// loadMetaspace reads a Metaspace pre-tokenizer. Files written before
// prepend_scheme existed have add_prefix_space: false means "never", true
// or absent "always".
func loadMetaspace(field string, raw json.RawMessage) (metaspace, error) {
	var mj metaspaceJSON
	if err := decodeField(field, raw, &mj); err != nil {
		return metaspace{}, err
	}
	m := metaspace{replacement: "▁", prepend: prependAlways, split: mj.Split == nil || *mj.Split}
	if mj.Replacement != nil {
		if utf8.RuneCountInString(*mj.Replacement) != 1 {
			return metaspace{}, fieldErrorf(field+".replacement", "%q is not one character", *mj.Replacement)
		}
		m.replacement = *mj.Replacement
	}
	if mj.PrependScheme != nil {
		switch *mj.PrependScheme {
		case "always":
		case "first":
			m.prepend = prependFirst
		case "never":
			m.prepend = prependNever
		default:
			return metaspace{}, unsupported(field+".prepend_scheme", *mj.PrependScheme)
		}
	}
	if mj.AddPrefixSpace != nil && !*mj.AddPrefixSpace {
		if m.prepend != prependNever && mj.PrependScheme != nil {
			return metaspace{}, fieldErrorf(field+".add_prefix_space", "false contradicts prepend_scheme %q", *mj.PrependScheme)
		}
		m.prepend = prependNever
	}
	return m, nil
}

// metaspace applies m to s and passes the pieces on.
func (p *preTokenizer) metaspace(s string, atStart bool, m *metaspace, rest []preStep, e *encoder) {
	if strings.IndexByte(s, ' ') >= 0 {
		s = strings.ReplaceAll(s, " ", m.replacement)
	}
	if !strings.HasPrefix(s, m.replacement) &&
		(m.prepend == prependAlways || m.prepend == prependFirst && atStart) {
		s = m.replacement + s
	}
	if !m.split {
		p.emit(s, atStart, rest, e)
		return
	}
	// Cut before every replacement character (the delimiter merged with
	// what follows it).
	first := true
	for s != "" {
		from := 0
		if strings.HasPrefix(s, m.replacement) {
			from = len(m.replacement)
		}
		n := strings.Index(s[from:], m.replacement)
		if n < 0 {
			n = len(s)
		} else {
			n += from
		}
		p.emit(s[:n], atStart && first, rest, e)
		s, first = s[n:], false
	}
}

// whitespaceSplit is WhitespaceSplit: the runs of non-whitespace
// characters (Unicode White_Space) are the pieces.
func (p *preTokenizer) whitespaceSplit(s string, atStart bool, rest []preStep, e *encoder) {
	start := -1
	for i, r := range s {
		space := unicode.IsSpace(r)
		switch {
		case space && start >= 0:
			p.emit(s[start:i], atStart && start == 0, rest, e)
			start = -1
		case !space && start < 0:
			start = i
		}
	}
	if start >= 0 {
		p.emit(s[start:], atStart && start == 0, rest, e)
	}
}

// splitBehavior is what Split does with the text its pattern matches.
type splitBehavior uint8

const (
	splitIsolated           splitBehavior = iota // a piece of its own
	splitRemoved                                 // dropped
	splitMergedWithPrevious                      // appended to the piece before
	splitMergedWithNext                          // put before the piece after
	splitContiguous                              // consecutive matches make one piece
)

var splitBehaviors = map[string]splitBehavior{
	"Isolated": splitIsolated, "Removed": splitRemoved, "MergedWithPrevious": splitMergedWithPrevious,
	"MergedWithNext": splitMergedWithNext, "Contiguous": splitContiguous,
}

// span is a piece of a string being split: [start, end), and whether the
// pattern matched it.
type span struct {
	start, end int
	match      bool
}

// splitLiteral splits s at every occurrence of st.literal with
// st.behavior, as the Hugging Face library folds the matches.
func (p *preTokenizer) splitLiteral(s string, atStart bool, st *preStep, rest []preStep, e *encoder) {
	var spans []span
	lit := st.literal
	for i := 0; i < len(s); {
		j := strings.Index(s[i:], lit)
		if j < 0 {
			spans = append(spans, span{i, len(s), false})
			break
		}
		if j > 0 {
			spans = append(spans, span{i, i + j, false})
		}
		spans = append(spans, span{i + j, i + j + len(lit), true})
		i += j + len(lit)
	}
	for _, sp := range foldSpans(spans, st.behavior) {
		removed := sp.match && st.behavior == splitRemoved
		if sp.end > sp.start && !removed {
			p.emit(s[sp.start:sp.end], atStart && sp.start == 0, rest, e)
		}
	}
}

// foldSpans merges matched spans into their neighbours as behavior says;
// Removed and Isolated keep the spans as they are.
func foldSpans(spans []span, behavior splitBehavior) []span {
	var out []span
	prevMatch := false
	switch behavior {
	case splitMergedWithPrevious:
		for _, sp := range spans {
			if sp.match && !prevMatch && len(out) > 0 {
				out[len(out)-1].end = sp.end
			} else {
				out = append(out, span{sp.start, sp.end, false})
			}
			prevMatch = sp.match
		}
	case splitMergedWithNext:
		for i := len(spans) - 1; i >= 0; i-- {
			sp := spans[i]
			if sp.match && !prevMatch && len(out) > 0 {
				out[len(out)-1].start = sp.start
			} else {
				out = append(out, span{sp.start, sp.end, false})
			}
			prevMatch = sp.match
		}
		for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
			out[i], out[j] = out[j], out[i]
		}
	case splitContiguous:
		for _, sp := range spans {
			if sp.match == prevMatch && len(out) > 0 {
				out[len(out)-1].end = sp.end
			} else {
				out = append(out, span{sp.start, sp.end, false})
			}
			prevMatch = sp.match
		}
	default:
		return spans
	}
	return out
}

// literalSplitter is a Split with a literal pattern and the Isolated
// behaviour: the occurrences and the text between them are the pieces.
type literalSplitter struct {
	lit string
}

func (l literalSplitter) next(s string) int {
	if strings.HasPrefix(s, l.lit) {
		return len(l.lit)
	}
	if i := strings.Index(s, l.lit); i >= 0 {
		return i
	}
	return len(s)
}
