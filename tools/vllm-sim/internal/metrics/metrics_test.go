package metrics

import (
	"fmt"
	"testing"
)

// vLLM's build_1_2_5_buckets: 1, 2, 5, 10, ... up to the last value not
// above the maximum.
func TestBuckets125(t *testing.T) {
	for max, want := range map[int]string{
		100:   "[1 2 5 10 20 50 100]",
		99:    "[1 2 5 10 20 50]",
		1:     "[1]",
		32768: "[1 2 5 10 20 50 100 200 500 1000 2000 5000 10000 20000]",
	} {
		if got := fmt.Sprint(Buckets125(max)); got != want {
			t.Errorf("Buckets125(%d) = %s, want %s", max, got, want)
		}
	}
}
