package slo

import (
	"math"
	"testing"
)

// near fails the test unless got is within tol of want, relatively for
// |want| > 1 and absolutely otherwise.
func near(t *testing.T, name string, got, want, tol float64) {
	t.Helper()
	scale := max(1, math.Abs(want))
	if math.IsNaN(got) || math.Abs(got-want) > tol*scale {
		t.Errorf("%s = %.12g, want %.12g (tol %g)", name, got, want, tol)
	}
}

// mustModel builds a model or fails the test.
func mustModel(t testing.TB, p Params, w Workload, q Queue) *Model {
	t.Helper()
	m, err := NewModel(p, w, q)
	if err != nil {
		t.Fatalf("NewModel(%+v, %+v, %+v): %v", p, w, q, err)
	}
	return m
}
