package hf

import (
	"encoding/json"
	"fmt"
)

// preTokenizer cuts normalized text into the words BPE encodes: each step
// cuts every piece of the step before it further.
type preTokenizer struct {
	steps []preStep
}

// preStep is one split pattern, or (ByteLevel's add_prefix_space) a space
// put before each piece that does not start with one.
type preStep struct {
	split       splitter
	prefixSpace bool
}

// words passes each word of s to e.word.
func (p *preTokenizer) words(s string, e *encoder) {
	p.run(s, p.steps, e)
}

func (p *preTokenizer) run(s string, steps []preStep, e *encoder) {
	for len(steps) > 0 && steps[0].prefixSpace {
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
	split, rest := steps[0].split, steps[1:]
	for s != "" {
		n := split.next(s)
		if len(rest) == 0 {
			e.word(s[:n])
		} else {
			p.run(s[:n], rest, e)
		}
		s = s[n:]
	}
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

// loadPreTokenizer reads raw, the value of "pre_tokenizer". Byte-level BPE
// needs a ByteLevel pre-tokenizer, last.
func loadPreTokenizer(raw json.RawMessage) (*preTokenizer, error) {
	const field = "pre_tokenizer"
	if isNull(raw) {
		return nil, fieldErrorf(field, "missing: byte-level BPE needs a ByteLevel pre-tokenizer")
	}
	var l preLoader
	if err := l.load(field, raw); err != nil {
		return nil, err
	}
	if !l.byteLevel {
		return nil, fieldErrorf(field, "no ByteLevel pre-tokenizer: byte-level BPE needs one")
	}
	return &preTokenizer{steps: l.steps}, nil
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
		var bl byteLevelJSON
		if err := decodeField(field, raw, &bl); err != nil {
			return err
		}
		l.byteLevel = true
		if bl.AddPrefixSpace {
			l.steps = append(l.steps, preStep{prefixSpace: true})
		}
		if bl.UseRegex == nil || *bl.UseRegex {
			l.steps = append(l.steps, preStep{split: gpt2Splitter{}})
		}
		return nil
	case "Split":
		s, err := loadSplit(field, raw)
		if err != nil {
			return err
		}
		l.steps = append(l.steps, preStep{split: s})
		return nil
	}
	return unsupported(field+".type", typ)
}

// loadSplit reads a Split pre-tokenizer: one of the known patterns, with
// the Isolated behaviour.
func loadSplit(field string, raw json.RawMessage) (splitter, error) {
	var sj splitJSON
	if err := decodeField(field, raw, &sj); err != nil {
		return nil, err
	}
	if sj.Behavior != "Isolated" {
		return nil, unsupported(field+".behavior", sj.Behavior)
	}
	if sj.Invert {
		return nil, unsupported(field+".invert", true)
	}
	pattern, ok := sj.Pattern["Regex"]
	if !ok || len(sj.Pattern) != 1 {
		if s, isString := sj.Pattern["String"]; isString {
			return nil, fieldErrorf(field+".pattern.String", "%q: string patterns are %w", s, ErrUnsupported)
		}
		return nil, fieldErrorf(field+".pattern", "want {\"Regex\": ...}")
	}
	s := splitterFor(pattern)
	if s == nil {
		return nil, fieldErrorf(field+".pattern.Regex", "%q is %w: known are the Llama 3 (cl100k), Qwen 2 and GPT-2 patterns", pattern, ErrUnsupported)
	}
	return s, nil
}
