package hf

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// maxID bounds token ids (JSON ids are read as int64; Encode returns
// uint32).
const maxID = 1<<31 - 1

// vocabulary maps ids back to tokens; it is what Decode and VocabSize use.
type vocabulary struct {
	tokens map[uint32]string // id -> raw bytes (model) or content (added)
	size   int               // largest id + 1
}

func (v *vocabulary) add(id uint32, token string) {
	v.tokens[id] = token
	v.size = max(v.size, int(id)+1)
}

// loadModel builds the BPE model described by raw, the value of "model".
func loadModel(raw json.RawMessage, vocab *vocabulary) (*bpe, error) {
	if isNull(raw) {
		return nil, fieldErrorf("model", "missing")
	}
	var mj modelJSON
	if err := decodeField("model", raw, &mj); err != nil {
		return nil, err
	}
	if err := checkModelOptions(&mj); err != nil {
		return nil, err
	}
	m := &bpe{
		vocab:        make(map[string]uint32, len(mj.Vocab)),
		literal:      make(map[string]uint32),
		size:         len(mj.Vocab),
		merges:       make(map[uint64]merge),
		ignoreMerges: mj.IgnoreMerges,
		cache:        newWordCache(),
	}
	if len(mj.Vocab) == 0 {
		return nil, fieldErrorf("model.vocab", "missing or empty")
	}
	byID := make(map[uint32]string, len(mj.Vocab))
	for token, id := range mj.Vocab {
		if id < 0 || id > maxID {
			return nil, fieldErrorf("model.vocab", "token %q has id %d, outside [0, %d]", token, id, maxID)
		}
		if other, dup := byID[uint32(id)]; dup {
			a, b := min(token, other), max(token, other)
			return nil, fieldErrorf("model.vocab", "tokens %q and %q share id %d", a, b, id)
		}
		byID[uint32(id)] = token
		raw, ok := byteLevelDecode(token)
		if !ok {
			// Not in the byte-level alphabet: no byte sequence can
			// produce it, so BPE never does; Decode shows it as is.
			m.literal[token] = uint32(id)
			vocab.add(uint32(id), token)
			continue
		}
		m.vocab[raw] = uint32(id)
		vocab.add(uint32(id), raw)
	}
	for b := range 256 {
		id, ok := m.vocab[string([]byte{byte(b)})]
		if !ok {
			return nil, fieldErrorf("model.vocab", "no token for byte 0x%02x (%q in the byte-level alphabet)", b, byteToRune[b])
		}
		m.byteIDs[b] = id
	}
	merges, err := decodeMerges(mj.Merges)
	if err != nil {
		return nil, err
	}
	for i, pair := range merges {
		field := fmt.Sprintf("model.merges[%d]", i)
		var ids [3]int64
		for k, tok := range [3]string{pair[0], pair[1], pair[0] + pair[1]} {
			id, ok := mj.Vocab[tok]
			if !ok {
				return nil, fieldErrorf(field, "token %q is not in model.vocab", tok)
			}
			ids[k] = id
		}
		// A later duplicate replaces an earlier one, as in the Hugging
		// Face library.
		m.merges[pairKey(uint32(ids[0]), uint32(ids[1]))] = merge{rank: uint32(i), id: uint32(ids[2])}
	}
	m.initBytePairs()
	return m, nil
}

// checkModelOptions refuses model settings this package does not
// implement.
func checkModelOptions(mj *modelJSON) error {
	switch {
	case mj.Type != "" && mj.Type != "BPE":
		return unsupported("model.type", mj.Type)
	case mj.Dropout != nil && *mj.Dropout != 0:
		return unsupported("model.dropout", *mj.Dropout)
	case mj.ContinuingSubwordPrefix != nil && *mj.ContinuingSubwordPrefix != "":
		return unsupported("model.continuing_subword_prefix", *mj.ContinuingSubwordPrefix)
	case mj.EndOfWordSuffix != nil && *mj.EndOfWordSuffix != "":
		return unsupported("model.end_of_word_suffix", *mj.EndOfWordSuffix)
	case mj.ByteFallback:
		return unsupported("model.byte_fallback", true)
	}
	return nil
}

// decodeMerges reads model.merges in either of its forms: ["a b", ...]
// (older files) or [["a", "b"], ...].
func decodeMerges(raw json.RawMessage) ([][2]string, error) {
	if isNull(raw) {
		return nil, nil
	}
	var asStrings []string
	errStrings := json.Unmarshal(raw, &asStrings)
	if errStrings == nil {
		out := make([][2]string, len(asStrings))
		for i, s := range asStrings {
			a, b, ok := strings.Cut(s, " ")
			if !ok || a == "" || b == "" {
				return nil, fieldErrorf(fmt.Sprintf("model.merges[%d]", i), "%q is not two tokens separated by a space", s)
			}
			out[i] = [2]string{a, b}
		}
		return out, nil
	}
	var asPairs [][]string
	if err := json.Unmarshal(raw, &asPairs); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(errStrings, &te) && errors.As(err, &te) {
			return nil, fieldErrorf("model.merges", "want an array of \"a b\" strings or of [a, b] pairs")
		}
		return nil, &FieldError{Field: "model.merges", Err: err}
	}
	out := make([][2]string, len(asPairs))
	for i, p := range asPairs {
		if len(p) != 2 {
			return nil, fieldErrorf(fmt.Sprintf("model.merges[%d]", i), "a pair has 2 tokens, not %d", len(p))
		}
		out[i] = [2]string{p[0], p[1]}
	}
	return out, nil
}
