package blockhash

import (
	"encoding/hex"
	"testing"
)

func seq(from, to uint32) []uint32 {
	var out []uint32
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

// The test vectors of spec/vllm-wire.md §2.
func TestVLLMVectors(t *testing.T) {
	h := New("0")
	b0, err := h.Block(h.None(), seq(1, 16), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := b0.Wire(); got != 3236607068019569386 {
		t.Errorf("block 0 = %d, want 3236607068019569386", got)
	}
	b1, _ := h.Block(b0, seq(17, 32), nil)
	if got := b1.Wire(); got != 2758186210834249151 {
		t.Errorf("block 1 = %d, want 2758186210834249151", got)
	}
	lora, _ := h.Block(h.None(), seq(1, 16), []any{"my-lora"})
	if got := lora.Wire(); got != 15444946753610453501 {
		t.Errorf("block 0 with extra [my-lora] = %d, want 15444946753610453501", got)
	}
	chain, err := h.Chain(nil, h.None(), seq(1, 40), 16, nil)
	if err != nil || len(chain) != 2 || chain[0] != b0 || chain[1] != b1 {
		t.Errorf("chain = %v, %v", chain, err)
	}
}

func TestCBOREncoding(t *testing.T) {
	cases := []struct {
		v    any
		want string
	}{
		{"0", "6130"},
		{[]any{}, "80"},
		{uint64(23), "17"},
		{uint64(24), "1818"},
		{uint64(256), "190100"},
		{uint64(1 << 16), "1a00010000"},
		{uint64(1 << 32), "1b0000000100000000"},
		{-1, "20"},
		{int64(-500), "3901f3"},
		{[]byte{1, 2}, "420102"},
		{nil, "f6"},
		{[]any{"a", uint32(1), []any{nil}}, "8361610181f6"},
	}
	for _, c := range cases {
		b, err := appendAny(nil, c.v)
		if err != nil {
			t.Fatal(err)
		}
		if got := hex.EncodeToString(b); got != c.want {
			t.Errorf("%#v: %s, want %s", c.v, got, c.want)
		}
	}
	if _, err := appendAny(nil, 1.5); err == nil {
		t.Error("a float extra key was accepted")
	}
}

func BenchmarkBlock(b *testing.B) {
	h := New("0")
	tokens := seq(1, 16)
	parent := h.None()
	b.ReportAllocs()
	for b.Loop() {
		parent, _ = h.Block(parent, tokens, nil)
	}
}
