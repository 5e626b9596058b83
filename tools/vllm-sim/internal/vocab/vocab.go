// Package vocab maps the built-in tokenizer's ids back to text, for vLLM's
// /detokenize. The built-in tokenizer (libs/tokenizer) has no vocabulary
// file: a one-byte piece's id is the byte, a longer piece's id a hash of
// it, which cannot be inverted. A Table learns the piece of each id from
// the texts the simulator tokenizes, so that the ids of any text it has
// seen (a prompt, a /tokenize input, its own generated words) decode back
// to that text.
package vocab

import (
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/hermod/hermod/libs/tokenizer"
)

// maxPieceBytes bounds a piece of the built-in tokenizer: a special token
// "<|name|>" is at most 67 bytes (word pieces at most 5, a rune 4).
const maxPieceBytes = 67

// Table is the pieces of the built-in tokenizer's ids learned so far. The
// tokenizer is the same everywhere, so one table can serve every pod of a
// process. Its methods are safe for concurrent use; it holds about 1 MiB
// of pointers plus the pieces (at most one per id).
type Table struct {
	pieces [tokenizer.BuiltinVocabSize]atomic.Pointer[string]
}

// Learn records the piece of each id of ids, which must be the built-in
// tokenizer's encoding of text. The first piece learned for an id stays
// (two pieces whose hashes collide share an id). Learning stops at an id
// it cannot place in text (ids that are not text's encoding).
//
// An id already known costs a lookup; a new one a few encodings of
// prefixes of the rest of text, to find where its piece ends.
func (t *Table) Learn(text string, ids []uint32) {
	for _, id := range ids {
		n := t.pieceLen(text, id)
		if n == 0 {
			return
		}
		if id >= 256 && t.pieces[id].Load() == nil {
			p := strings.Clone(text[:n])
			t.pieces[id].CompareAndSwap(nil, &p)
		}
		text = text[n:]
	}
}

// Split appends to dst the piece of text each id of ids is, one per id:
// ids must be the built-in tokenizer's encoding of text, and the pieces
// concatenate to it. (Of ids that are not, the first it cannot place gets
// the rest of text, the ids after it "".)
func (t *Table) Split(dst []string, text string, ids []uint32) []string {
	for i, id := range ids {
		n := t.pieceLen(text, id)
		if n == 0 || i == len(ids)-1 {
			n = len(text)
		}
		dst = append(dst, text[:n])
		text = text[n:]
	}
	return dst
}

// pieceLen is the length of id's piece at the start of text, or 0 when id
// is no piece there. A one-byte piece's id is the byte; a longer piece is
// the shortest prefix that encodes to id alone (a shorter prefix encodes
// to a truncated piece, whose id differs but for a hash collision).
func (t *Table) pieceLen(text string, id uint32) int {
	if id < 256 {
		if len(text) > 0 && text[0] == byte(id) {
			return 1
		}
		return 0
	}
	if int(id) >= len(t.pieces) {
		return 0
	}
	if p := t.pieces[id].Load(); p != nil && strings.HasPrefix(text, *p) {
		return len(*p)
	}
	var buf [4]uint32
	for n := 2; n <= min(len(text), maxPieceBytes); n++ {
		if got := (tokenizer.Builtin{}).Encode(buf[:0], text[:n]); len(got) == 1 && got[0] == id {
			return n
		}
	}
	return 0
}

// Piece returns id's piece: the byte of an id below 256, the learned piece
// of a longer one; ok is false for an id not learned (or out of the
// vocabulary).
func (t *Table) Piece(id uint32) (piece string, ok bool) {
	switch {
	case id < 256:
		return string([]byte{byte(id)}), true
	case int(id) >= len(t.pieces):
		return "", false
	}
	if p := t.pieces[id].Load(); p != nil {
		return *p, true
	}
	return "", false
}

// AppendText appends the text of ids: each id's piece, and for an id whose
// piece is not known the placeholder "<|id_N|>" (a special token to the
// built-in tokenizer: one token, as the id was).
func (t *Table) AppendText(dst []byte, ids []uint32) []byte {
	for _, id := range ids {
		if p, ok := t.Piece(id); ok {
			dst = append(dst, p...)
			continue
		}
		dst = append(dst, "<|id_"...)
		dst = strconv.AppendUint(dst, uint64(id), 10)
		dst = append(dst, "|>"...)
	}
	return dst
}
