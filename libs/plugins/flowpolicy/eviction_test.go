package flowpolicy

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hermod/hermod/libs/scheduling/schedulingtest"
)

func TestPriorityThenTimeEvictsBefore(t *testing.T) {
	t0 := time.Unix(1000, 0)
	c := func(prio int, ms int) EvictionCandidate {
		return EvictionCandidate{Priority: prio, Admitted: t0.Add(time.Duration(ms) * time.Millisecond)}
	}
	for _, tc := range []struct {
		name string
		a, b EvictionCandidate
		want bool
	}{
		{"lower priority first", c(-5, 0), c(-1, 0), true},
		{"higher priority after", c(-1, 0), c(-5, 0), false},
		{"lower priority first though older", c(-5, 0), c(-1, 900), true},
		{"zero after negative", c(0, 900), c(-1, 0), false},
		{"equal priority: the newer first", c(-1, 10), c(-1, 5), true},
		{"equal priority: the older after", c(-1, 5), c(-1, 10), false},
		{"equal in both: neither first", c(-1, 5), c(-1, 5), false},
	} {
		if got := (PriorityThenTime{}).EvictsBefore(tc.a, tc.b); got != tc.want {
			t.Errorf("%s: EvictsBefore(%+v, %+v) = %v", tc.name, tc.a, tc.b, got)
		}
	}
	// sorted by it, the eviction order of a mixed set
	set := []EvictionCandidate{c(-1, 1), c(-10, 2), c(-1, 3), c(-10, 4), c(-2, 0)}
	slices.SortStableFunc(set, func(a, b EvictionCandidate) int {
		switch {
		case (PriorityThenTime{}).EvictsBefore(a, b):
			return -1
		case (PriorityThenTime{}).EvictsBefore(b, a):
			return 1
		}
		return 0
	})
	var got []string
	for _, e := range set {
		got = append(got, fmt.Sprintf("%d@%d", e.Priority, e.Admitted.Sub(t0).Milliseconds()))
	}
	if s := strings.Join(got, " "); s != "-10@4 -10@2 -2@0 -1@3 -1@1" {
		t.Errorf("eviction order %s", s)
	}
}

func TestSheddableEvictable(t *testing.T) {
	for prio, want := range map[int]bool{-100: true, -1: true, 0: false, 1: false, 100: false} {
		if got := (Sheddable{}).Evictable(EvictionCandidate{Priority: prio}); got != want {
			t.Errorf("priority %d: evictable %v, want %v", prio, got, want)
		}
	}
}

// Both types load from a config's plugins, parameterless: a parameter is
// unknown (a warning), as for the other parameterless policies.
func TestEvictionPoliciesRegistered(t *testing.T) {
	h := schedulingtest.NewHandle()
	o := schedulingtest.New[*EvictionPolicy](t, h, PriorityThenTimeEviction, "order", "")
	if o.Order == nil || o.Filter != nil || o.TypedName().Type != PriorityThenTimeEviction || o.TypedName().Name != "order" {
		t.Errorf("order: %+v", o)
	}
	f := schedulingtest.New[*EvictionPolicy](t, h, SheddableEvictionFilter, "sheddable", `{"threshold": 0}`)
	if f.Filter == nil || f.Order != nil || f.TypedName().Type != SheddableEvictionFilter {
		t.Errorf("filter: %+v", f)
	}
	if len(h.Warnings) != 1 || !strings.Contains(h.Warnings[0], "threshold: unknown parameter") {
		t.Errorf("warnings %q", h.Warnings)
	}
}
