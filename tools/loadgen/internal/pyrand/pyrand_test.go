package pyrand

import (
	"testing"
)

// Values printed by CPython 3.11 for the same calls.
func TestMatchesCPython(t *testing.T) {
	r := New(42)
	wantFloats := []float64{0.6394267984578837, 0.025010755222666936, 0.27502931836911926}
	for i, w := range wantFloats {
		if got := r.Random(); got != w {
			t.Fatalf("random() #%d = %v, want %v", i, got, w)
		}
	}
	r.Seed(42)
	var ints []int
	for range 6 {
		ints = append(ints, r.RandInt(10, 20))
	}
	if want := []int{20, 11, 10, 14, 13, 13}; !equal(ints, want) {
		t.Fatalf("randint(10, 20) x6 = %v, want %v", ints, want)
	}
	r.Seed(12345 + 600)
	xs := []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}
	r.Shuffle(len(xs), func(i, j int) { xs[i], xs[j] = xs[j], xs[i] })
	if want := []int{9, 0, 5, 4, 1, 7, 3, 2, 8, 6}; !equal(xs, want) {
		t.Fatalf("shuffle = %v, want %v", xs, want)
	}
	if got, want := r.Uniform(-0.5, 0.5), -0.3092390497369014; got != want {
		t.Fatalf("uniform = %v, want %v", got, want)
	}
	r.Seed(1 << 40)
	if got, want := r.GetRandBits(32), uint32(445128065); got != want {
		t.Fatalf("seed(2**40) getrandbits(32) = %d, want %d", got, want)
	}
	r.Seed(-7)
	a := r.Random()
	r.Seed(7)
	if b := r.Random(); a != b {
		t.Fatalf("seed(-7) and seed(7) differ: %v %v", a, b)
	}
}

func equal(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
