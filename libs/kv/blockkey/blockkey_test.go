package blockkey

import (
	"testing"

	"github.com/cespare/xxhash/v2"
)

func tokens(from, n int) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = uint32(from + i)
	}
	return out
}

func TestChainAgreesWithBlockByBlock(t *testing.T) {
	k, err := New(16, 0)
	if err != nil {
		t.Fatal(err)
	}
	prompt := tokens(1, 40) // two full blocks and 8 left over
	keys := k.Prompt(nil, "llama", prompt)
	if len(keys) != 2 {
		t.Fatalf("%d keys for 40 tokens of blocks of 16", len(keys))
	}
	root := k.Root("llama")
	k0 := k.Next(root, prompt[:16], nil)
	k1 := k.Next(k0, prompt[16:32], nil)
	if keys[0] != k0 || keys[1] != k1 {
		t.Fatalf("chain %v, block by block %v %v", keys, k0, k1)
	}
	// a BlockStored continuing from the first block computes the same key
	if got := k.Chain(nil, k0, prompt[16:32]); len(got) != 1 || got[0] != k1 {
		t.Fatalf("continuation %v, want %v", got, k1)
	}
}

func TestKeysSeparateWhatDiffers(t *testing.T) {
	k, _ := New(4, 0)
	other, _ := New(4, 1)
	base := k.Next(k.Root("m"), []uint32{1, 2, 3, 4}, nil)
	for name, key := range map[string]Key{
		"another model":  k.Next(k.Root("lora-a"), []uint32{1, 2, 3, 4}, nil),
		"another seed":   other.Next(other.Root("m"), []uint32{1, 2, 3, 4}, nil),
		"another token":  k.Next(k.Root("m"), []uint32{1, 2, 3, 5}, nil),
		"token order":    k.Next(k.Root("m"), []uint32{2, 1, 3, 4}, nil),
		"extra inputs":   k.Next(k.Root("m"), []uint32{1, 2, 3, 4}, []byte{0x91, 0x01}),
		"another parent": k.Next(k.Root("m")+1, []uint32{1, 2, 3, 4}, nil),
	} {
		if key == base {
			t.Errorf("%s gives the same key", name)
		}
	}
	if k.Root("m") == base {
		t.Error("a root equals a block key")
	}
	// token count is hashed: a block is not a prefix of a longer one
	if k.Next(1, []uint32{0}, nil) == k.Next(1, []uint32{0, 0}, nil) {
		t.Error("blocks of different lengths collide")
	}
}

func TestLongBlocksAndExtraUseTheStreamingPath(t *testing.T) {
	k, _ := New(100, 7)
	long := tokens(5, 100)
	extra := make([]byte, 100)
	// the streaming and stack paths hash the same canonical bytes
	want := Key(hashOf(appendBlock(nil, 3, long, extra)))
	if got := k.Next(3, long, extra); got != want {
		t.Fatalf("streaming key %v, want %v", got, want)
	}
	short := tokens(5, 16)
	if got, want := k.Next(3, short, nil), Key(hashOf(appendBlock(nil, 3, short, nil))); got != want {
		t.Fatalf("stack key %v, want %v", got, want)
	}
	if _, err := New(0, 0); err == nil {
		t.Fatal("block size 0 accepted")
	}
}

func BenchmarkPrompt512Blocks(b *testing.B) {
	k, _ := New(16, 0)
	prompt := tokens(0, 512*16)
	dst := make([]Key, 0, 512)
	b.SetBytes(int64(4 * len(prompt)))
	b.ReportAllocs()
	for b.Loop() {
		dst = k.Prompt(dst[:0], "meta-llama/Llama-3.1-8B-Instruct", prompt)
	}
}

func hashOf(b []byte) uint64 { return xxhash.Sum64(b) }
