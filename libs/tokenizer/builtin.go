package tokenizer

import (
	"unicode/utf8"

	"github.com/cespare/xxhash/v2"
)

// BuiltinName names the built-in tokenizer and its version. Changing how it
// splits or numbers tokens is a new version: block keys computed with the
// old one stop matching.
const BuiltinName = "hermod-builtin-v1"

// BuiltinVocabSize is the built-in tokenizer's vocabulary size (that of
// Llama 3's tokenizer, so ids look familiar).
const BuiltinVocabSize = 128256

// maxPieceBytes bounds a word piece: with typical English this yields about
// four characters per token, the ratio real BPE tokenizers show and the one
// Hermod's character-based estimates assume.
const maxPieceBytes = 4

// Builtin is a deterministic tokenizer that needs no vocabulary files, used
// by the simulator and by tests. It cuts text into pieces:
//
//   - a special token "<|name|>" (letters, digits, '_' inside) is one piece;
//   - a run of ASCII letters and digits, with at most one space before it,
//     is cut into pieces of at most 4 bytes (" hello" -> " hel", "lo");
//   - any other character (punctuation, newline, a further space, a non-ASCII
//     rune) is one piece.
//
// A one-byte piece has the byte's value as id (0..255). A longer piece has
// id 256 + xxhash64(piece) mod (BuiltinVocabSize - 256). The same text gives
// the same ids in every process.
type Builtin struct{}

var _ Tokenizer = Builtin{}

// Name implements Tokenizer.
func (Builtin) Name() string { return BuiltinName }

// VocabSize implements Tokenizer.
func (Builtin) VocabSize() int { return BuiltinVocabSize }

// Encode implements Tokenizer.
func (Builtin) Encode(dst []uint32, text string) []uint32 {
	forEachPiece(text, func(p string) { dst = append(dst, pieceID(p)) })
	return dst
}

// forEachPiece calls f with each piece of text, in order; the pieces
// concatenate to text.
func forEachPiece(text string, f func(string)) {
	for i := 0; i < len(text); {
		if n := specialLen(text[i:]); n > 0 {
			f(text[i : i+n])
			i += n
			continue
		}
		start := i
		if text[i] == ' ' && i+1 < len(text) && isWordByte(text[i+1]) {
			i++ // a single space joins the word that follows it
		}
		if i < len(text) && isWordByte(text[i]) {
			for i < len(text) && isWordByte(text[i]) {
				end := min(start+maxPieceBytes, len(text))
				j := i
				for j < end && isWordByte(text[j]) {
					j++
				}
				f(text[start:j])
				start, i = j, j
			}
			continue
		}
		_, size := utf8.DecodeRuneInString(text[i:])
		f(text[i : i+size])
		i += size
	}
}

func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// specialLen returns the length of a special token "<|name|>" at the start
// of s, or 0.
func specialLen(s string) int {
	if len(s) < 5 || s[0] != '<' || s[1] != '|' {
		return 0
	}
	for i := 2; i < len(s) && i < 66; i++ {
		c := s[i]
		switch {
		case c == '|':
			if i+1 < len(s) && s[i+1] == '>' && i > 2 {
				return i + 2
			}
			return 0
		case isWordByte(c) || c == '_':
		default:
			return 0
		}
	}
	return 0
}

func pieceID(p string) uint32 {
	if len(p) == 1 {
		return uint32(p[0])
	}
	return 256 + uint32(xxhash.Sum64String(p)%(BuiltinVocabSize-256))
}
