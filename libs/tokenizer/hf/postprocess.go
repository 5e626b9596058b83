package hf

import (
	"encoding/json"
	"fmt"
	"slices"
)

// postProcessor is what a post-processor does to a single sequence when
// special tokens are added: ids before and ids after it.
type postProcessor struct {
	prefix, suffix []uint32
}

// wrap makes q's ids go around p's: q is applied after p.
func (p postProcessor) wrap(q postProcessor) postProcessor {
	return postProcessor{
		prefix: slices.Concat(q.prefix, p.prefix),
		suffix: slices.Concat(p.suffix, q.suffix),
	}
}

type templateJSON struct {
	Single        []templatePieceJSON            `json:"single"`
	SpecialTokens map[string]templateSpecialJSON `json:"special_tokens"`
}

type templatePieceJSON struct {
	SpecialToken *struct {
		ID string `json:"id"`
	} `json:"SpecialToken"`
	Sequence *struct {
		ID string `json:"id"`
	} `json:"Sequence"`
}

type templateSpecialJSON struct {
	IDs []uint32 `json:"ids"`
}

type postSequenceJSON struct {
	Processors []json.RawMessage `json:"processors"`
}

// bertJSON is BertProcessing and RobertaProcessing: [token, id] pairs.
type bertJSON struct {
	Sep [2]json.RawMessage `json:"sep"`
	Cls [2]json.RawMessage `json:"cls"`
}

// loadPostProcessor reads raw, the value of field ("post_processor").
func loadPostProcessor(field string, raw json.RawMessage) (postProcessor, error) {
	if isNull(raw) {
		return postProcessor{}, nil
	}
	typ, err := componentType(field, raw)
	if err != nil {
		return postProcessor{}, err
	}
	switch typ {
	case "ByteLevel":
		return postProcessor{}, nil // it only adjusts offsets
	case "TemplateProcessing":
		return loadTemplate(field, raw)
	case "BertProcessing", "RobertaProcessing":
		var bj bertJSON
		if err := decodeField(field, raw, &bj); err != nil {
			return postProcessor{}, err
		}
		var cls, sep uint32
		if err := decodeField(field+".cls[1]", bj.Cls[1], &cls); err != nil {
			return postProcessor{}, err
		}
		if err := decodeField(field+".sep[1]", bj.Sep[1], &sep); err != nil {
			return postProcessor{}, err
		}
		return postProcessor{prefix: []uint32{cls}, suffix: []uint32{sep}}, nil
	case "Sequence":
		var seq postSequenceJSON
		if err := decodeField(field, raw, &seq); err != nil {
			return postProcessor{}, err
		}
		var out postProcessor
		for i, r := range seq.Processors {
			p, err := loadPostProcessor(fmt.Sprintf("%s.processors[%d]", field, i), r)
			if err != nil {
				return postProcessor{}, err
			}
			out = out.wrap(p)
		}
		return out, nil
	}
	return postProcessor{}, unsupported(field+".type", typ)
}

// loadTemplate reads a TemplateProcessing: the "single" template must be
// special tokens around sequence A.
func loadTemplate(field string, raw json.RawMessage) (postProcessor, error) {
	var tj templateJSON
	if err := decodeField(field, raw, &tj); err != nil {
		return postProcessor{}, err
	}
	var p postProcessor
	seenA := false
	for i, piece := range tj.Single {
		pf := fmt.Sprintf("%s.single[%d]", field, i)
		switch {
		case piece.Sequence != nil:
			if piece.Sequence.ID != "A" || seenA {
				return postProcessor{}, fieldErrorf(pf, "sequence %q in a single-sequence template is %w", piece.Sequence.ID, ErrUnsupported)
			}
			seenA = true
		case piece.SpecialToken != nil:
			st, ok := tj.SpecialTokens[piece.SpecialToken.ID]
			if !ok {
				return postProcessor{}, fieldErrorf(field+".special_tokens", "no entry for %q, which %s uses", piece.SpecialToken.ID, pf)
			}
			if seenA {
				p.suffix = append(p.suffix, st.IDs...)
			} else {
				p.prefix = append(p.prefix, st.IDs...)
			}
		default:
			return postProcessor{}, fieldErrorf(pf, "want a SpecialToken or a Sequence")
		}
	}
	if !seenA {
		return postProcessor{}, fieldErrorf(field+".single", "no Sequence A")
	}
	return p, nil
}
