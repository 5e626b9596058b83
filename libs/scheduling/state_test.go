package scheduling

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// ScratchIndices holds 0..n-1 whatever the buffer held before, and reuses
// the ScratchInts buffer.
func TestScratchIndices(t *testing.T) {
	cs := NewCycleState(rand.New(rand.NewPCG(1, 2)))
	b := cs.ScratchInts(4)
	for i := range b {
		b[i] = 9
	}
	got := cs.ScratchIndices(3)
	if !slices.Equal(got, []int{0, 1, 2}) {
		t.Fatalf("ScratchIndices(3) = %v", got)
	}
	if &got[0] != &b[0] {
		t.Error("ScratchIndices did not reuse the cycle's buffer")
	}
	if got := cs.ScratchIndices(0); len(got) != 0 {
		t.Errorf("ScratchIndices(0) = %v", got)
	}
}
