package hf

import (
	"encoding/json"
	"fmt"
)

// preTokenizer cuts normalized text into the words the model encodes:
// each step cuts every piece of the step before it further.
type preTokenizer struct {
	steps     []preStep
	byteLevel bool // has a ByteLevel step: the model works on bytes
}

type stepKind uint8

const (
	stepSplit       stepKind = iota // split by a pattern (split, literal)
	stepPrefixSpace                 // ByteLevel's add_prefix_space
	stepMetaspace                   // Metaspace
	stepWhitespace                  // WhitespaceSplit
)

// preStep is one pre-tokenizer step.
type preStep struct {
	kind     stepKind
	split    splitter // stepSplit with the Isolated behaviour
	literal  string   // stepSplit with another behaviour: the delimiter
	behavior splitBehavior
	meta     metaspace
}

// words passes each word of s to e.word; atStart tells whether s starts
// the input text (Metaspace's prepend_scheme "first" needs it).
func (p *preTokenizer) words(s string, atStart bool, e *encoder) {
	p.run(s, atStart, p.steps, e)
}

func (p *preTokenizer) run(s string, atStart bool, steps []preStep, e *encoder) {
	for len(steps) > 0 && steps[0].kind == stepPrefixSpace {
		if s == "" || s[0] != ' ' {
			s = " " + s
		}
		steps = steps[1:]
	}
	if s == "" {
		return
	}
	if len(steps) == 0 {
		e.word(s)
		return
	}
	st, rest := &steps[0], steps[1:]
	switch st.kind {
	case stepSplit:
		if st.split == nil {
			p.splitLiteral(s, atStart, st, rest, e)
			return
		}
		for s != "" {
			n := st.split.next(s)
			if len(rest) == 0 {
				e.word(s[:n])
			} else {
				p.run(s[:n], atStart, rest, e)
			}
			s, atStart = s[n:], false
		}
	case stepMetaspace:
		p.metaspace(s, atStart, &st.meta, rest, e)
	case stepWhitespace:
		p.whitespaceSplit(s, atStart, rest, e)
	}
}

// emit passes piece, one of the pieces a step cut, to the next steps.
func (p *preTokenizer) emit(piece string, atStart bool, rest []preStep, e *encoder) {
	if len(rest) == 0 {
		if piece != "" {
			e.word(piece)
		}
		return
	}
	p.run(piece, atStart, rest, e)
}

type byteLevelJSON struct {
	AddPrefixSpace bool  `json:"add_prefix_space"`
	UseRegex       *bool `json:"use_regex"` // default true
}

type splitJSON struct {
	Pattern  map[string]string `json:"pattern"`
	Behavior string            `json:"behavior"`
	Invert   bool              `json:"invert"`
}

type preSequenceJSON struct {
	PreTokenizers []json.RawMessage `json:"pretokenizers"`
}

// loadPreTokenizer reads raw, the value of "pre_tokenizer". With a
// ByteLevel step (last) the model is byte-level BPE; without one the
// model works on characters (SentencePiece-style BPE, Unigram).
func loadPreTokenizer(raw json.RawMessage) (*preTokenizer, error) {
	const field = "pre_tokenizer"
	if isNull(raw) {
		return &preTokenizer{}, nil
	}
	var l preLoader
	if err := l.load(field, raw); err != nil {
		return nil, err
	}
	return &preTokenizer{steps: l.steps, byteLevel: l.byteLevel}, nil
}

type preLoader struct {
	steps     []preStep
	byteLevel bool // seen a ByteLevel step
}

func (l *preLoader) load(field string, raw json.RawMessage) error {
	typ, err := componentType(field, raw)
	if err != nil {
		return err
	}
	if l.byteLevel && typ != "Sequence" {
		return fieldErrorf(field, "%s after ByteLevel is %w (ByteLevel must come last)", typ, ErrUnsupported)
	}
	switch typ {
	case "Sequence":
		var seq preSequenceJSON
		if err := decodeField(field, raw, &seq); err != nil {
			return err
		}
		for i, r := range seq.PreTokenizers {
			if err := l.load(fmt.Sprintf("%s.pretokenizers[%d]", field, i), r); err != nil {
				return err
			}
		}
		return nil
	case "ByteLevel":
		return l.loadByteLevel(field, raw)
	case "Split":
		st, err := loadSplit(field, raw)
		if err != nil {
			return err
		}
		l.steps = append(l.steps, st)
		return nil
	case "Metaspace":
		m, err := loadMetaspace(field, raw)
		if err != nil {
			return err
		}
		l.steps = append(l.steps, preStep{kind: stepMetaspace, meta: m})
		return nil
	case "WhitespaceSplit":
		l.steps = append(l.steps, preStep{kind: stepWhitespace})
		return nil
	}
	return unsupported(field+".type", typ)
}

func (l *preLoader) loadByteLevel(field string, raw json.RawMessage) error {
	var bl byteLevelJSON
	if err := decodeField(field, raw, &bl); err != nil {
		return err
	}
	for _, st := range l.steps {
		if st.kind == stepMetaspace {
			return fieldErrorf(field, "ByteLevel after Metaspace is %w", ErrUnsupported)
		}
	}
	l.byteLevel = true
	if bl.AddPrefixSpace {
		l.steps = append(l.steps, preStep{kind: stepPrefixSpace})
	}
	if bl.UseRegex == nil || *bl.UseRegex {
		l.steps = append(l.steps, preStep{kind: stepSplit, split: gpt2Splitter{}})
	}
	return nil
}

// loadSplit reads a Split pre-tokenizer: one of the known patterns with
// the Isolated behaviour, or a literal ("String") pattern with any
// behaviour.
func loadSplit(field string, raw json.RawMessage) (preStep, error) {
	var sj splitJSON
	if err := decodeField(field, raw, &sj); err != nil {
		return preStep{}, err
	}
	behavior, ok := splitBehaviors[sj.Behavior]
	if !ok {
		return preStep{}, unsupported(field+".behavior", sj.Behavior)
	}
	if sj.Invert {
		return preStep{}, unsupported(field+".invert", true)
	}
	if lit, isString := sj.Pattern["String"]; isString && len(sj.Pattern) == 1 {
		if lit == "" {
			return preStep{}, fieldErrorf(field+".pattern.String", "empty")
		}
		if behavior == splitIsolated {
			return preStep{kind: stepSplit, split: literalSplitter{lit}}, nil
		}
		return preStep{kind: stepSplit, literal: lit, behavior: behavior}, nil
	}
	pattern, ok := sj.Pattern["Regex"]
	if !ok || len(sj.Pattern) != 1 {
		return preStep{}, fieldErrorf(field+".pattern", "want {\"Regex\": ...} or {\"String\": ...}")
	}
	s := splitterFor(pattern)
	if s == nil {
		return preStep{}, fieldErrorf(field+".pattern.Regex", "%q is %w: known are the Llama 3 (cl100k), Qwen 2, GPT-2, o200k (gpt-oss) and DeepSeek V3 patterns", pattern, ErrUnsupported)
	}
	if behavior != splitIsolated {
		return preStep{}, fieldErrorf(field+".behavior", "%q with a Regex pattern is %w (only Isolated is)", sj.Behavior, ErrUnsupported)
	}
	return preStep{kind: stepSplit, split: s}, nil
}
