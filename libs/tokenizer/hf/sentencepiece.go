package hf

import (
	"slices"
	"unicode/utf8"
)

// charSymbols is how a BPE model that is not byte-level (SentencePiece
// style: Llama 2, Gemma) starts a word: one symbol per character that is
// a token; a character that is not becomes its bytes' <0xNN> tokens
// (byte_fallback, if the vocabulary has them all), or else the unk_token
// (consecutive ones fused into one with fuse_unk), or else nothing.
type charSymbols struct {
	ascii        [utf8.RuneSelf]int32 // id of each ASCII character, or -1
	byteFallback bool
	fallback     [256]int32 // ids of <0x00> .. <0xFF>, or -1
	unk          int64      // id of unk_token, or -1
	fuseUnk      bool
}

// initChars sets up m (not byte-level) from the model's options.
func (m *bpe) initChars(mj *modelJSON, ids map[string]int64, vocab *vocabulary) error {
	cs := &charSymbols{byteFallback: mj.ByteFallback, unk: -1, fuseUnk: mj.FuseUnk}
	for c := range utf8.RuneSelf {
		cs.ascii[c] = -1
		if id, ok := m.vocab[string(rune(c))]; ok {
			cs.ascii[c] = int32(id)
		}
	}
	for b := range cs.fallback {
		cs.fallback[b] = -1
	}
	if cs.byteFallback {
		cs.fallback = byteFallbackIDs(m.vocab, vocab)
	}
	if mj.UnkToken != nil {
		id, ok := ids[*mj.UnkToken]
		if !ok {
			return fieldErrorf("model.unk_token", "%q is not in model.vocab", *mj.UnkToken)
		}
		cs.unk = id
	}
	m.chars = cs
	return nil
}

// encodeChars is encodeWord for a model that is not byte-level.
func (m *bpe) encodeChars(dst []uint32, word string, sc *scratch) []uint32 {
	if m.ignoreMerges {
		if id, ok := m.vocab[word]; ok {
			return append(dst, id)
		}
	}
	cacheable := len(word) <= cacheMaxWordSize
	if cacheable {
		if out, ok := m.cache.get(dst, word); ok {
			return out
		}
	}
	start := len(dst)
	ids := m.chars.symbols(m.vocab, sc.ids[:0], word)
	switch {
	case len(ids) == 0:
	case len(ids) <= scanMaxBytes:
		pairs := sc.merges[:0]
		for i := 0; i+1 < len(ids); i++ {
			pairs = append(pairs, m.lookup(ids[i], ids[i+1]))
		}
		dst = m.scanLoop(dst, ids, pairs, sc)
	default:
		sc.ids = ids
		dst = m.mergeHeapIDs(dst, ids, sc)
	}
	if cacheable {
		m.cache.put(word, slices.Clone(dst[start:]))
	}
	return dst
}

// symbols appends the initial symbols of word to ids, as the Hugging Face
// library's BPE does (including its order when a pending unknown
// character is followed by byte-fallback tokens: they come first).
func (cs *charSymbols) symbols(vocab map[string]uint32, ids []uint32, word string) []uint32 {
	pendingUnk := false
	for i := 0; i < len(word); {
		id, n := int64(-1), 1
		if c := word[i]; c < utf8.RuneSelf {
			id = int64(cs.ascii[c])
		} else {
			_, n = utf8.DecodeRuneInString(word[i:])
			if v, ok := vocab[word[i:i+n]]; ok {
				id = int64(v)
			}
		}
		char := word[i : i+n]
		i += n
		if id >= 0 {
			if pendingUnk {
				ids, pendingUnk = append(ids, uint32(cs.unk)), false
			}
			ids = append(ids, uint32(id))
			continue
		}
		if cs.byteFallback && cs.hasBytes(char) {
			for k := range len(char) {
				ids = append(ids, uint32(cs.fallback[char[k]]))
			}
			continue
		}
		if cs.unk < 0 {
			continue // no unk_token: the character is dropped
		}
		if pendingUnk && !cs.fuseUnk {
			ids = append(ids, uint32(cs.unk))
		}
		pendingUnk = true
	}
	if pendingUnk {
		ids = append(ids, uint32(cs.unk))
	}
	return ids
}

// hasBytes reports whether every byte of s has a byte-fallback token.
func (cs *charSymbols) hasBytes(s string) bool {
	for k := range len(s) {
		if cs.fallback[s[k]] < 0 {
			return false
		}
	}
	return true
}
