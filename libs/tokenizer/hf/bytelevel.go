package hf

import "unicode/utf8"

// GPT-2's byte-level alphabet maps every byte to a printable rune so that
// vocabularies can be stored as text: printable Latin-1 bytes map to
// themselves, the 68 others to U+0100.. in byte order. Vocabulary entries
// are written in that alphabet; this package works on raw bytes and
// converts the vocabulary once at load time.
var (
	byteToRune = makeByteToRune()
	runeToByte = makeRuneToByte(&byteToRune)
)

// byteLevelRuneLimit bounds the runes of the alphabet (all are below it).
const byteLevelRuneLimit = 0x144

func makeByteToRune() [256]rune {
	var m [256]rune
	next := rune(0x100)
	for b := range 256 {
		printable := b >= '!' && b <= '~' || b >= 0xA1 && b <= 0xAC || b >= 0xAE && b <= 0xFF
		if printable {
			m[b] = rune(b)
		} else {
			m[b] = next
			next++
		}
	}
	return m
}

func makeRuneToByte(b2r *[256]rune) [byteLevelRuneLimit]int16 {
	var m [byteLevelRuneLimit]int16
	for i := range m {
		m[i] = -1
	}
	for b, r := range b2r {
		m[r] = int16(b)
	}
	return m
}

// byteLevelDecode converts a token written in the byte-level alphabet into
// the raw bytes it stands for; ok is false if it has a rune outside the
// alphabet.
func byteLevelDecode(token string) (raw string, ok bool) {
	buf := make([]byte, 0, len(token))
	for _, r := range token {
		if r >= byteLevelRuneLimit || runeToByte[r] < 0 {
			return "", false
		}
		buf = append(buf, byte(runeToByte[r]))
	}
	return string(buf), true
}

// byteLevelEncode writes raw bytes in the byte-level alphabet.
func byteLevelEncode(raw string) string {
	buf := make([]byte, 0, 2*len(raw))
	for i := range len(raw) {
		buf = utf8.AppendRune(buf, byteToRune[raw[i]])
	}
	return string(buf)
}
