package hf

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"unicode/utf8"
)

// unigram is a Unigram (SentencePiece) model: a word is cut into the
// pieces of the vocabulary whose scores (log probabilities) sum highest,
// found by Viterbi over the word's characters. A character that starts no
// one-character piece may be covered by the unknown piece, scored below
// every piece; consecutive unknown pieces are fused, and with
// byte_fallback an unknown piece becomes its bytes' <0xNN> tokens.
type unigram struct {
	vocab        map[string]uint32 // piece -> id (a later duplicate wins)
	scores       []float64         // by id
	unkID        uint32
	unkScore     float64 // the lowest score less 10, as the library has it
	byteFallback bool
	fallback     [256]int32 // ids of <0x00> .. <0xFF>, or -1
	trie         pieceTrie
	cache        *wordCache
}

// unkPenalty is how far below the lowest piece score an unknown character
// scores.
const unkPenalty = 10.0

// unigramPiece is an entry of a Unigram model.vocab: [piece, score].
type unigramPiece struct {
	piece string
	score float64
}

func (p *unigramPiece) UnmarshalJSON(data []byte) error {
	var pair [2]json.RawMessage
	if err := json.Unmarshal(data, &pair); err != nil {
		return fmt.Errorf("want [piece, score]: %w", err)
	}
	if err := json.Unmarshal(pair[0], &p.piece); err != nil {
		return fmt.Errorf("piece: %w", err)
	}
	if err := json.Unmarshal(pair[1], &p.score); err != nil {
		return fmt.Errorf("score of %q: %w", p.piece, err)
	}
	return nil
}

// loadUnigram builds a Unigram model.
func loadUnigram(mj *modelJSON, vocab *vocabulary) (*unigram, error) {
	var pieces []unigramPiece
	if err := decodeField("model.vocab", mj.Vocab, &pieces); err != nil {
		return nil, err
	}
	switch {
	case len(pieces) == 0:
		return nil, fieldErrorf("model.vocab", "missing or empty")
	case len(pieces) > maxID:
		return nil, fieldErrorf("model.vocab", "%d pieces, more than %d", len(pieces), maxID)
	case mj.UnkID == nil:
		// The library fails to encode text with a character no piece
		// covers; Encode cannot fail, so such models are refused.
		return nil, fieldErrorf("model.unk_id", "null is %w (encoding would fail on unknown characters)", ErrUnsupported)
	case *mj.UnkID < 0 || *mj.UnkID >= int64(len(pieces)):
		return nil, fieldErrorf("model.unk_id", "%d is not the id of a piece (there are %d)", *mj.UnkID, len(pieces))
	}
	u := &unigram{
		vocab:        make(map[string]uint32, len(pieces)),
		scores:       make([]float64, len(pieces)),
		unkID:        uint32(*mj.UnkID),
		byteFallback: mj.ByteFallback,
		trie:         newPieceTrie(),
		cache:        newWordCache(),
	}
	minScore := math.Inf(1)
	for i, p := range pieces {
		if math.IsNaN(p.score) || math.IsInf(p.score, 0) {
			return nil, fieldErrorf(fmt.Sprintf("model.vocab[%d]", i), "score %v", p.score)
		}
		u.vocab[p.piece] = uint32(i)
		u.scores[i] = p.score
		minScore = min(minScore, p.score)
		vocab.add(uint32(i), p.piece)
	}
	for piece, id := range u.vocab {
		u.trie.add(piece, id)
	}
	u.unkScore = minScore - unkPenalty
	for b := range u.fallback {
		u.fallback[b] = -1
	}
	if u.byteFallback {
		u.fallback = byteFallbackIDs(u.vocab, vocab)
	}
	return u, nil
}

// tokenID implements model.
func (u *unigram) tokenID(token string) (uint32, bool) {
	id, ok := u.vocab[token]
	return id, ok
}

// vocabSize implements model.
func (u *unigram) vocabSize() int { return len(u.scores) }

// latticeNode is the best path found so far that ends at a position of
// the word: its score, where its last piece starts (-1: none yet) and
// that piece's id.
type latticeNode struct {
	score float64
	start int32
	id    uint32
}

// piece is one piece of the best path: word[start:end], with id.
type piece struct {
	start, end int32
	id         uint32
}

// encodeWord implements model.
func (u *unigram) encodeWord(dst []uint32, word string, sc *scratch) []uint32 {
	cacheable := len(word) <= cacheMaxWordSize
	if cacheable {
		if out, ok := u.cache.get(dst, word); ok {
			return out
		}
	}
	start := len(dst)
	lattice := u.viterbi(word, sc)
	dst = u.appendPath(dst, word, lattice, sc)
	if cacheable {
		u.cache.put(word, slices.Clone(dst[start:]))
	}
	return dst
}

// viterbi returns, for each byte position of word that starts a
// character (and its end), the best path ending there. Among paths that
// score the same the first found wins: earlier last pieces, then shorter.
func (u *unigram) viterbi(word string, sc *scratch) []latticeNode {
	lattice := slices.Grow(sc.lattice[:0], len(word)+1)[:len(word)+1]
	for i := range lattice {
		lattice[i] = latticeNode{start: -1}
	}
	lattice[0].start = 0
	for pos := 0; pos < len(word); {
		till := lattice[pos].score
		_, charLen := utf8.DecodeRuneInString(word[pos:])
		single := false
		for node, k := int32(0), pos; k < len(word); k++ {
			var ok bool
			if node, ok = u.trie.child(node, word[k]); !ok {
				break
			}
			id := u.trie.term[node]
			if id < 0 {
				continue
			}
			end := k + 1
			if score := u.scores[id] + till; lattice[end].start < 0 || score > lattice[end].score {
				lattice[end] = latticeNode{score: score, start: int32(pos), id: uint32(id)}
			}
			single = single || end-pos == charLen
		}
		if end := pos + charLen; !single {
			if score := u.unkScore + till; lattice[end].start < 0 || score > lattice[end].score {
				lattice[end] = latticeNode{score: score, start: int32(pos), id: u.unkID}
			}
		}
		pos += charLen
	}
	sc.lattice = lattice
	return lattice
}

// appendPath appends the ids of the best path: consecutive unknown pieces
// fused into one, which is the piece's id if the fused text is a piece,
// else its bytes' tokens (byte_fallback), else the unknown id.
func (u *unigram) appendPath(dst []uint32, word string, lattice []latticeNode, sc *scratch) []uint32 {
	path := sc.pieces[:0]
	for end := int32(len(word)); end > 0; {
		n := lattice[end]
		p := piece{start: n.start, end: end, id: n.id}
		if n.id == u.unkID && len(path) > 0 && path[len(path)-1].id == u.unkID {
			path[len(path)-1].start = n.start
		} else {
			path = append(path, p)
		}
		end = n.start
	}
	sc.pieces = path
	for i := len(path) - 1; i >= 0; i-- {
		p := path[i]
		if p.id != u.unkID {
			dst = append(dst, p.id)
			continue
		}
		text := word[p.start:p.end]
		if id, ok := u.vocab[text]; ok {
			dst = append(dst, id)
			continue
		}
		if u.byteFallback && u.hasBytes(text) {
			for k := range len(text) {
				dst = append(dst, uint32(u.fallback[text[k]]))
			}
			continue
		}
		dst = append(dst, u.unkID)
	}
	return dst
}

func (u *unigram) hasBytes(s string) bool {
	for k := range len(s) {
		if u.fallback[s[k]] < 0 {
			return false
		}
	}
	return true
}

// pieceTrie is a byte trie of the pieces, for finding every piece that
// starts at a position of a word, shortest first.
type pieceTrie struct {
	root  [256]int32       // child of the root by byte, or 0
	edges map[uint64]int32 // node<<8 | byte -> child, below the root
	term  []int32          // node -> id of the piece ending there, or -1
}

func newPieceTrie() pieceTrie {
	return pieceTrie{edges: make(map[uint64]int32), term: []int32{-1}}
}

func (t *pieceTrie) add(piece string, id uint32) {
	node := int32(0)
	for k := range len(piece) {
		child, ok := t.child(node, piece[k])
		if !ok {
			child = int32(len(t.term))
			t.term = append(t.term, -1)
			if node == 0 {
				t.root[piece[k]] = child
			} else {
				t.edges[uint64(node)<<8|uint64(piece[k])] = child
			}
		}
		node = child
	}
	if node != 0 {
		t.term[node] = int32(id)
	}
}

func (t *pieceTrie) child(node int32, b byte) (int32, bool) {
	if node == 0 {
		c := t.root[b]
		return c, c != 0
	}
	c, ok := t.edges[uint64(node)<<8|uint64(b)]
	return c, ok
}
