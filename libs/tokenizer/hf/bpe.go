package hf

import (
	"math"
	"slices"
	"sync"
)

// bpe is a BPE model: words start as one symbol per byte (byte-level) or
// per character (see sentencepiece.go), and adjacent symbols are merged
// by merge rank, lowest first, the leftmost pair first among equal ranks,
// until no pair has a merge.
type bpe struct {
	byteLevel    bool
	vocab        map[string]uint32 // byte-level: raw bytes -> id; else token as written -> id
	literal      map[string]uint32 // byte-level: tokens not in the byte-level alphabet, as written
	size         int               // number of tokens (the library's model vocab size)
	byteIDs      [256]uint32       // byte-level: id of each one-byte token
	merges       map[uint64]merge  // pairKey(left, right) -> merge
	bytePairs    *[1 << 16]merge   // byte-level: merges of two one-byte tokens, by the two bytes
	ignoreMerges bool              // a word that is a token is that token
	cache        *wordCache
	chars        *charSymbols // not byte-level: how characters become symbols
}

type merge struct {
	rank uint32 // position in the merges list: lower merges first
	id   uint32 // id of the merged token
}

const noRank = math.MaxUint32

func pairKey(left, right uint32) uint64 { return uint64(left)<<32 | uint64(right) }

// tokenID implements model.
func (m *bpe) tokenID(token string) (uint32, bool) {
	if !m.byteLevel {
		id, found := m.vocab[token]
		return id, found
	}
	if raw, ok := byteLevelDecode(token); ok {
		id, found := m.vocab[raw]
		return id, found
	}
	id, found := m.literal[token]
	return id, found
}

// vocabSize implements model.
func (m *bpe) vocabSize() int { return m.size }

func (m *bpe) lookup(left, right uint32) merge {
	if mg, ok := m.merges[pairKey(left, right)]; ok {
		return mg
	}
	return merge{rank: noRank}
}

// initBytePairs fills bytePairs from merges: a word's first merges are
// all of byte pairs, and the table saves a map lookup for each.
func (m *bpe) initBytePairs() {
	m.bytePairs = new([1 << 16]merge)
	for a := range 256 {
		for b := range 256 {
			m.bytePairs[a<<8|b] = m.lookup(m.byteIDs[a], m.byteIDs[b])
		}
	}
}

func (m *bpe) bytePair(a, b byte) merge { return m.bytePairs[int(a)<<8|int(b)] }

// scanMaxBytes bounds the words merged by rescanning the pairs after each
// merge (quadratic, fast for short words); longer ones use a heap.
const scanMaxBytes = 48

// encodeWord implements model.
func (m *bpe) encodeWord(dst []uint32, word string, sc *scratch) []uint32 {
	if !m.byteLevel {
		return m.encodeChars(dst, word, sc)
	}
	if len(word) == 1 {
		return append(dst, m.byteIDs[word[0]])
	}
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
	if len(word) <= scanMaxBytes {
		dst = m.mergeScan(dst, word, sc)
	} else {
		dst = m.mergeHeap(dst, word, sc)
	}
	if cacheable {
		m.cache.put(word, slices.Clone(dst[start:]))
	}
	return dst
}

// scratch holds the buffers of one Encode call.
type scratch struct {
	ids     []uint32
	merges  []merge
	syms    []symbol
	heap    candidateHeap
	lattice []latticeNode // Unigram
	pieces  []piece       // Unigram
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// mergeScan merges word keeping the symbols and the merge of each
// adjacent pair in arrays, and finding the next merge by a scan.
func (m *bpe) mergeScan(dst []uint32, word string, sc *scratch) []uint32 {
	ids := sc.ids[:0]
	for i := range len(word) {
		ids = append(ids, m.byteIDs[word[i]])
	}
	pairs := sc.merges[:0] // pairs[i] merges ids[i] and ids[i+1]
	for i := 0; i+1 < len(word); i++ {
		pairs = append(pairs, m.bytePair(word[i], word[i+1]))
	}
	return m.scanLoop(dst, ids, pairs, sc)
}

// scanLoop merges ids, whose adjacent pairs have the merges pairs, by
// rescanning pairs for the best merge after each merge.
func (m *bpe) scanLoop(dst, ids []uint32, pairs []merge, sc *scratch) []uint32 {
	for {
		best, bestRank := -1, uint32(noRank)
		for i, p := range pairs {
			if p.rank < bestRank {
				best, bestRank = i, p.rank
			}
		}
		if best < 0 {
			break
		}
		ids[best] = pairs[best].id
		ids = slices.Delete(ids, best+1, best+2)
		pairs = slices.Delete(pairs, best, best+1)
		if best > 0 {
			pairs[best-1] = m.lookup(ids[best-1], ids[best])
		}
		if best < len(pairs) {
			pairs[best] = m.lookup(ids[best], ids[best+1])
		}
	}
	sc.ids, sc.merges = ids, pairs
	return append(dst, ids...)
}

// scratchKeepMax bounds the buffers a pooled scratch keeps.
const scratchKeepMax = 1 << 16

// trim drops buffers grown large by a long word before the scratch goes
// back to the pool.
func (sc *scratch) trim() {
	if cap(sc.syms) > scratchKeepMax || cap(sc.heap) > scratchKeepMax {
		sc.syms, sc.heap = nil, nil
	}
	if cap(sc.ids) > scratchKeepMax || cap(sc.merges) > scratchKeepMax {
		sc.ids, sc.merges = nil, nil
	}
	if cap(sc.lattice) > scratchKeepMax || cap(sc.pieces) > scratchKeepMax {
		sc.lattice, sc.pieces = nil, nil
	}
}
