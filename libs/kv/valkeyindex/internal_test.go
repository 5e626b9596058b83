package valkeyindex

import (
	"testing"

	"github.com/hermod/hermod/libs/kv/blockkey"
)

// FuzzDecodeEngineBlock: what the server returns for an engine block
// decodes to what was encoded, or is refused; nothing panics.
func FuzzDecodeEngineBlock(f *testing.F) {
	f.Add(engineBlock{keys: []blockkey.Key{1}, tiers: 1}.encode())
	f.Add(engineBlock{keys: []blockkey.Key{1, 2, 3, 4}, tiers: 3}.encode())
	f.Add("")
	f.Add("\x01short")
	f.Fuzz(func(t *testing.T, s string) {
		b, ok := decodeEngineBlock(s)
		if !ok {
			return
		}
		if b.encode() != s || len(b.keys) == 0 {
			t.Fatalf("%q decoded to %+v", s, b)
		}
	})
}
