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

// model encodes the words the pre-tokenizer cuts: BPE (byte-level or on
// characters) or Unigram.
type model interface {
	// encodeWord appends the ids of word (not empty) to dst.
	encodeWord(dst []uint32, word string, sc *scratch) []uint32
	// tokenID returns the id of a model token written token in
	// tokenizer.json.
	tokenID(token string) (uint32, bool)
	// vocabSize is the number of model tokens (the library's model vocab
	// size).
	vocabSize() int
}

// vocabulary maps ids back to tokens; it is what Decode and VocabSize use.
type vocabulary struct {
	tokens map[uint32]string // id -> raw bytes (model) or content (added)
	size   int               // largest id + 1
}

func (v *vocabulary) add(id uint32, token string) {
	v.tokens[id] = token
	v.size = max(v.size, int(id)+1)
}

// loadModel builds the model described by raw, the value of "model". A
// BPE model is byte-level if the pre-tokenizer has a ByteLevel step.
func loadModel(raw json.RawMessage, byteLevel bool, vocab *vocabulary) (model, error) {
	if isNull(raw) {
		return nil, fieldErrorf("model", "missing")
	}
	var mj modelJSON
	if err := decodeField("model", raw, &mj); err != nil {
		return nil, err
	}
	switch {
	case mj.Dropout != nil && *mj.Dropout != 0:
		return nil, unsupported("model.dropout", *mj.Dropout)
	case mj.Type == "Unigram":
		return loadUnigram(&mj, vocab)
	case mj.Type != "" && mj.Type != "BPE":
		return nil, unsupported("model.type", mj.Type)
	case mj.ContinuingSubwordPrefix != nil && *mj.ContinuingSubwordPrefix != "":
		return nil, unsupported("model.continuing_subword_prefix", *mj.ContinuingSubwordPrefix)
	case mj.EndOfWordSuffix != nil && *mj.EndOfWordSuffix != "":
		return nil, unsupported("model.end_of_word_suffix", *mj.EndOfWordSuffix)
	}
	return loadBPE(&mj, byteLevel, vocab)
}

// loadBPE builds a BPE model: byte-level (GPT-2's alphabet, every byte a
// token) or on characters (SentencePiece style, with byte_fallback and
// unk_token for characters that are not tokens).
func loadBPE(mj *modelJSON, byteLevel bool, vocab *vocabulary) (*bpe, error) {
	var ids map[string]int64
	if err := decodeField("model.vocab", mj.Vocab, &ids); err != nil {
		return nil, err
	}
	if len(ids) == 0 {
		return nil, fieldErrorf("model.vocab", "missing or empty")
	}
	m := &bpe{
		byteLevel:    byteLevel,
		vocab:        make(map[string]uint32, len(ids)),
		literal:      make(map[string]uint32),
		size:         len(ids),
		merges:       make(map[uint64]merge),
		ignoreMerges: mj.IgnoreMerges,
		cache:        newWordCache(),
	}
	if err := m.loadVocab(ids, vocab); err != nil {
		return nil, err
	}
	var err error
	if byteLevel {
		err = m.initByteLevel()
	} else {
		err = m.initChars(mj, ids, vocab)
	}
	if err != nil {
		return nil, err
	}
	merges, err := decodeMerges(mj.Merges)
	if err != nil {
		return nil, err
	}
	for i, pair := range merges {
		field := fmt.Sprintf("model.merges[%d]", i)
		var mids [3]int64
		for k, tok := range [3]string{pair[0], pair[1], pair[0] + pair[1]} {
			id, ok := ids[tok]
			if !ok {
				return nil, fieldErrorf(field, "token %q is not in model.vocab", tok)
			}
			mids[k] = id
		}
		// A later duplicate replaces an earlier one, as in the Hugging
		// Face library.
		m.merges[pairKey(uint32(mids[0]), uint32(mids[1]))] = merge{rank: uint32(i), id: uint32(mids[2])}
	}
	if byteLevel {
		m.initBytePairs()
	}
	return m, nil
}

// loadVocab fills m.vocab (and, byte-level, m.literal) and vocab.
func (m *bpe) loadVocab(ids map[string]int64, vocab *vocabulary) error {
	byID := make(map[uint32]string, len(ids))
	for token, id := range ids {
		if id < 0 || id > maxID {
			return fieldErrorf("model.vocab", "token %q has id %d, outside [0, %d]", token, id, maxID)
		}
		if other, dup := byID[uint32(id)]; dup {
			a, b := min(token, other), max(token, other)
			return fieldErrorf("model.vocab", "tokens %q and %q share id %d", a, b, id)
		}
		byID[uint32(id)] = token
		if !m.byteLevel {
			m.vocab[token] = uint32(id)
			vocab.add(uint32(id), token)
			continue
		}
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
	return nil
}

// initByteLevel checks that every byte is a token and records their ids.
func (m *bpe) initByteLevel() error {
	for b := range 256 {
		id, ok := m.vocab[string([]byte{byte(b)})]
		if !ok {
			return fieldErrorf("model.vocab", "no token for byte 0x%02x (%q in the byte-level alphabet)", b, byteToRune[b])
		}
		m.byteIDs[b] = id
	}
	return nil
}

// byteFallbackToken is the token byte_fallback uses for byte b: <0x0A>.
func byteFallbackToken(b byte) string { return fmt.Sprintf("<0x%02X>", b) }

// byteFallbackIDs returns the ids of the byte_fallback tokens <0x00> ..
// <0xFF> (-1 for those vocab lacks) and records in v that they decode to
// their byte.
func byteFallbackIDs(vocab map[string]uint32, v *vocabulary) [256]int32 {
	var out [256]int32
	for b := range 256 {
		out[b] = -1
		if id, ok := vocab[byteFallbackToken(byte(b))]; ok {
			out[b] = int32(id)
			v.add(id, string([]byte{byte(b)}))
		}
	}
	return out
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
