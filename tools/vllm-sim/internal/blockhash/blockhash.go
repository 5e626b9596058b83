// Package blockhash computes vLLM's prefix-caching block hashes in its
// sha256_cbor mode, bit for bit, so a simulator's KV events carry the hashes
// a real engine (run with PYTHONHASHSEED and --prefix-caching-hash-algo
// sha256_cbor) would send:
//
//	NONE_HASH = sha256(cbor(seed))                     (seed: a text string)
//	block     = sha256(cbor([parent, [tokens...], extra]))
//
// where parent is the previous block's 32-byte digest (NONE_HASH for the
// first block), tokens are the block's token ids and extra is nil or the
// block's extra keys (a LoRA name, multimodal hashes, a cache salt). CBOR is
// canonical: smallest integer encodings, definite lengths. KV events carry a
// block as the integer of the digest's last 8 bytes, big-endian.
package blockhash

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
)

// Digest is a block's 32-byte hash.
type Digest [32]byte

// Wire is the 64-bit integer KV events carry for a digest: its last 8
// bytes, big-endian.
func (d Digest) Wire() uint64 { return binary.BigEndian.Uint64(d[24:]) }

// Hasher hashes chains of blocks for one seed.
type Hasher struct {
	none Digest
	buf  []byte
}

// New returns a Hasher whose chains start from sha256(cbor(seed)).
func New(seed string) *Hasher {
	var b []byte
	b = appendText(b, seed)
	return &Hasher{none: sha256.Sum256(b)}
}

// None is the parent digest of a chain's first block.
func (h *Hasher) None() Digest { return h.none }

// Block returns the digest of a block with the given parent, tokens and
// extra keys (nil for none). Extra keys may be strings, []byte, integers
// (int, int64, uint32, uint64) or nested []any. A Hasher is not safe for
// concurrent use.
func (h *Hasher) Block(parent Digest, tokens []uint32, extra []any) (Digest, error) {
	b := h.buf[:0]
	b = appendHead(b, majorArray, 3)
	b = appendBytes(b, parent[:])
	b = appendHead(b, majorArray, uint64(len(tokens)))
	for _, t := range tokens {
		b = appendHead(b, majorUint, uint64(t))
	}
	if extra == nil {
		b = append(b, simpleNull)
	} else {
		var err error
		if b, err = appendAny(b, extra); err != nil {
			return Digest{}, err
		}
	}
	h.buf = b
	return sha256.Sum256(b), nil
}

// Chain appends the digests of the full blocks of tokens (blockSize tokens
// each, a partial tail ignored), chained from parent, to dst. extra applies
// to every block.
func (h *Hasher) Chain(dst []Digest, parent Digest, tokens []uint32, blockSize int, extra []any) ([]Digest, error) {
	for i := 0; i+blockSize <= len(tokens); i += blockSize {
		d, err := h.Block(parent, tokens[i:i+blockSize], extra)
		if err != nil {
			return dst, err
		}
		dst = append(dst, d)
		parent = d
	}
	return dst, nil
}

// CBOR major types used here.
const (
	majorUint   = 0
	majorNegInt = 1
	majorBytes  = 2
	majorText   = 3
	majorArray  = 4
	simpleNull  = 0xf6
)

// appendHead writes a CBOR head with the smallest argument encoding.
func appendHead(b []byte, major byte, n uint64) []byte {
	m := major << 5
	switch {
	case n < 24:
		return append(b, m|byte(n))
	case n <= 0xff:
		return append(b, m|24, byte(n))
	case n <= 0xffff:
		return append(b, m|25, byte(n>>8), byte(n))
	case n <= 0xffffffff:
		return append(b, m|26, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
	return append(b, m|27, byte(n>>56), byte(n>>48), byte(n>>40), byte(n>>32), byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
}

func appendBytes(b, p []byte) []byte { return append(appendHead(b, majorBytes, uint64(len(p))), p...) }

func appendText(b []byte, s string) []byte {
	return append(appendHead(b, majorText, uint64(len(s))), s...)
}

func appendInt(b []byte, v int64) []byte {
	if v >= 0 {
		return appendHead(b, majorUint, uint64(v))
	}
	return appendHead(b, majorNegInt, uint64(-(v + 1)))
}

func appendAny(b []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(b, simpleNull), nil
	case string:
		return appendText(b, x), nil
	case []byte:
		return appendBytes(b, x), nil
	case int:
		return appendInt(b, int64(x)), nil
	case int64:
		return appendInt(b, x), nil
	case uint32:
		return appendHead(b, majorUint, uint64(x)), nil
	case uint64:
		return appendHead(b, majorUint, x), nil
	case []any:
		b = appendHead(b, majorArray, uint64(len(x)))
		for _, item := range x {
			var err error
			if b, err = appendAny(b, item); err != nil {
				return b, err
			}
		}
		return b, nil
	}
	return b, fmt.Errorf("blockhash: extra key of type %T cannot be hashed", v)
}
