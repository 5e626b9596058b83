// Package blockkey computes the prefix index's block keys (spec/vllm-wire.md
// §2). Engine block hashes cannot be recomputed from a prompt, so the index
// keys blocks by its own chain, computed the same way from a BlockStored
// event's token ids and from a request's tokenized prompt:
//
//	root(model)           = H(seed, "root", model or LoRA adapter name)
//	key_i                 = H(key_{i-1}, tokens_i, extra_i)
//
// H is XXH64 over a canonical little-endian encoding: the parent key (8
// bytes), the block's token count (4 bytes), its tokens (4 bytes each) and
// the block's extra bytes (multimodal hashes and the like; none for text).
// Only full blocks have keys.
package blockkey

import (
	"encoding/binary"
	"fmt"

	"github.com/cespare/xxhash/v2"
)

// Key is a block key.
type Key uint64

// DefaultBlockSize is the index's default tokens per block (vLLM's).
const DefaultBlockSize = 16

// Keyer computes the keys of one block size and seed. It is safe for
// concurrent use.
type Keyer struct {
	blockSize int
	seed      uint64
}

// New returns a Keyer for blocks of blockSize tokens; keyers with
// different seeds produce unrelated keys.
func New(blockSize int, seed uint64) (*Keyer, error) {
	if blockSize < 1 {
		return nil, fmt.Errorf("blockkey: block size must be positive (got %d)", blockSize)
	}
	return &Keyer{blockSize: blockSize, seed: seed}, nil
}

// BlockSize is the tokens per block.
func (k *Keyer) BlockSize() int { return k.blockSize }

// rootTag separates root keys from block keys.
const rootTag = "\x00hermod-root\x00"

// Root is the key the chain of a model (or LoRA adapter) starts from.
func (k *Keyer) Root(model string) Key {
	var buf [64]byte
	b := binary.LittleEndian.AppendUint64(buf[:0], k.seed)
	b = append(b, rootTag...)
	b = append(b, model...)
	return Key(xxhash.Sum64(b))
}

// stackTokens is how many tokens a block may have to be hashed from a
// stack buffer.
const stackTokens = 64

// Next is the key of the block of tokens that follows parent; extra are
// the block's extra hash inputs (nil for text).
func (k *Keyer) Next(parent Key, tokens []uint32, extra []byte) Key {
	if len(tokens) <= stackTokens && len(extra) <= 64 {
		var buf [12 + 4*stackTokens + 64]byte
		return Key(xxhash.Sum64(appendBlock(buf[:0], parent, tokens, extra)))
	}
	d := xxhash.New()
	var head [12]byte
	binary.LittleEndian.PutUint64(head[:], uint64(parent))
	binary.LittleEndian.PutUint32(head[8:], uint32(len(tokens)))
	_, _ = d.Write(head[:])
	var word [4 * stackTokens]byte
	for len(tokens) > 0 {
		n := min(len(tokens), stackTokens)
		for i, t := range tokens[:n] {
			binary.LittleEndian.PutUint32(word[4*i:], t)
		}
		_, _ = d.Write(word[:4*n])
		tokens = tokens[n:]
	}
	_, _ = d.Write(extra)
	return Key(d.Sum64())
}

func appendBlock(b []byte, parent Key, tokens []uint32, extra []byte) []byte {
	b = binary.LittleEndian.AppendUint64(b, uint64(parent))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(tokens)))
	for _, t := range tokens {
		b = binary.LittleEndian.AppendUint32(b, t)
	}
	return append(b, extra...)
}

// Chain appends to dst the keys of the full blocks of tokens following
// parent (a trailing partial block has no key). Text only: no extra
// inputs.
func (k *Keyer) Chain(dst []Key, parent Key, tokens []uint32) []Key {
	for len(tokens) >= k.blockSize {
		parent = k.Next(parent, tokens[:k.blockSize], nil)
		dst = append(dst, parent)
		tokens = tokens[k.blockSize:]
	}
	return dst
}

// Prompt appends the keys of a tokenized prompt's full blocks for model
// (or LoRA adapter name).
func (k *Keyer) Prompt(dst []Key, model string, tokens []uint32) []Key {
	return k.Chain(dst, k.Root(model), tokens)
}
