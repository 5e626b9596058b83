package hf

import (
	"encoding/json"
	"fmt"

	"golang.org/x/text/unicode/norm"
)

// normalizer applies Unicode normalization forms in order (Qwen uses NFC;
// Llama 3 none).
type normalizer []norm.Form

func (n normalizer) apply(s string) string {
	for _, f := range n {
		if f.QuickSpanString(s) != len(s) {
			s = f.String(s)
		}
	}
	return s
}

type normalizerSequenceJSON struct {
	Normalizers []json.RawMessage `json:"normalizers"`
}

// loadNormalizer reads raw, the value of field ("normalizer").
func loadNormalizer(field string, raw json.RawMessage) (normalizer, error) {
	if isNull(raw) {
		return nil, nil
	}
	typ, err := componentType(field, raw)
	if err != nil {
		return nil, err
	}
	switch typ {
	case "NFC":
		return normalizer{norm.NFC}, nil
	case "NFD":
		return normalizer{norm.NFD}, nil
	case "NFKC":
		return normalizer{norm.NFKC}, nil
	case "NFKD":
		return normalizer{norm.NFKD}, nil
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
