package hf

import (
	"encoding/json"
	"fmt"
	"strings"

	"golang.org/x/text/unicode/norm"
)

// normalizer applies its steps in order (Qwen uses NFC; Llama 2 prepends
// "▁" and replaces spaces by "▁"; Gemma 3 replaces spaces; Llama 3 has
// none).
type normalizer []normStep

// normStep is one normalizer: a Unicode normalization form, a
// replacement of a literal string, or a string put before the text.
type normStep struct {
	form          *norm.Form
	old, new      string // Replace: every old becomes new
	prepend       string // Prepend: put before non-empty text
	isReplacement bool
}

func (n normalizer) apply(s string) string {
	for i := range n {
		st := &n[i]
		switch {
		case st.form != nil:
			if st.form.QuickSpanString(s) != len(s) {
				s = st.form.String(s)
			}
		case st.isReplacement:
			if strings.Contains(s, st.old) {
				s = strings.ReplaceAll(s, st.old, st.new)
			}
		case s != "":
			s = st.prepend + s
		}
	}
	return s
}

type normalizerSequenceJSON struct {
	Normalizers []json.RawMessage `json:"normalizers"`
}

type replaceJSON struct {
	Pattern map[string]string `json:"pattern"`
	Content *string           `json:"content"`
}

type prependJSON struct {
	Prepend *string `json:"prepend"`
}

var forms = map[string]norm.Form{"NFC": norm.NFC, "NFD": norm.NFD, "NFKC": norm.NFKC, "NFKD": norm.NFKD}

// loadNormalizer reads raw, the value of field ("normalizer").
func loadNormalizer(field string, raw json.RawMessage) (normalizer, error) {
	if isNull(raw) {
		return nil, nil
	}
	typ, err := componentType(field, raw)
	if err != nil {
		return nil, err
	}
	if f, ok := forms[typ]; ok {
		return normalizer{{form: &f}}, nil
	}
	switch typ {
	case "Replace":
		st, err := loadReplace(field, raw)
		if err != nil {
			return nil, err
		}
		return normalizer{st}, nil
	case "Prepend":
		var pj prependJSON
		if err := decodeField(field, raw, &pj); err != nil {
			return nil, err
		}
		if pj.Prepend == nil {
			return nil, fieldErrorf(field+".prepend", "missing")
		}
		return normalizer{{prepend: *pj.Prepend}}, nil
	case "Sequence":
		var seq normalizerSequenceJSON
		if err := decodeField(field, raw, &seq); err != nil {
			return nil, err
		}
		var out normalizer
		for i, r := range seq.Normalizers {
			n, err := loadNormalizer(fmt.Sprintf("%s.normalizers[%d]", field, i), r)
			if err != nil {
				return nil, err
			}
			out = append(out, n...)
		}
		return out, nil
	}
	return nil, unsupported(field+".type", typ)
}

// loadReplace reads a Replace normalizer with a literal ("String")
// pattern; regular expressions are not supported.
func loadReplace(field string, raw json.RawMessage) (normStep, error) {
	var rj replaceJSON
	if err := decodeField(field, raw, &rj); err != nil {
		return normStep{}, err
	}
	if rj.Content == nil {
		return normStep{}, fieldErrorf(field+".content", "missing")
	}
	old, ok := rj.Pattern["String"]
	if !ok || len(rj.Pattern) != 1 {
		if re, isRegex := rj.Pattern["Regex"]; isRegex {
			return normStep{}, fieldErrorf(field+".pattern.Regex", "%q: regular expressions are %w", re, ErrUnsupported)
		}
		return normStep{}, fieldErrorf(field+".pattern", "want {\"String\": ...}")
	}
	if old == "" {
		return normStep{}, fieldErrorf(field+".pattern.String", "empty")
	}
	return normStep{isReplacement: true, old: old, new: *rj.Content}, nil
}
