package workload

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// key is a request without its launch time: what a shuffle must keep.
func key(r Request) string {
	return fmt.Sprintf("%s|%s|%d|%d|%s", r.ID, r.Kind, r.ISLWords, r.MaxTokens, r.Prompt)
}

func keys(w *Workload) []string {
	out := make([]string, len(w.Requests))
	for i, r := range w.Requests {
		out[i] = key(r)
	}
	return out
}

func ids(w *Workload) []string {
	out := make([]string, len(w.Requests))
	for i, r := range w.Requests {
		out[i] = r.ID
	}
	return out
}

// smallReferenceCommand is reference/000's command at a tenth of its size:
// 40 heavy seeds at t=0, then a burst with an inline heavy every 24.
func smallReferenceCommand(t *testing.T) *Workload {
	t.Helper()
	o := ReferenceCommand()
	o.Total, o.HeavySeeds = 80, 40
	w, err := Reference(o)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func TestShuffle(t *testing.T) {
	ref := smallReferenceCommand(t)
	poisson, err := Mixed(MixedOptions{Requests: 30, Rate: 2, Seed: 1, ArrivalSeed: 1})
	if err != nil {
		t.Fatal(err)
	}
	tied := &Workload{Name: "tied", Requests: []Request{
		{ID: "a", At: 0, MaxTokens: 1}, {ID: "b", At: 0, MaxTokens: 1}, {ID: "c", At: time.Second, MaxTokens: 1},
		{ID: "d", At: 2 * time.Second, MaxTokens: 1}, {ID: "e", At: 2 * time.Second, MaxTokens: 1}, {ID: "f", At: 3 * time.Second, MaxTokens: 1},
		{ID: "g", At: 4 * time.Second, MaxTokens: 1},
	}}
	for _, tc := range []struct {
		name string
		w    *Workload
		// groups are the sets of ids that must stay among themselves
		// (each at its own slots)
		groups [][]string
	}{
		{name: "reference command", w: ref, groups: [][]string{ids(ref)[:40], ids(ref)[40:]}},
		{name: "poisson", w: poisson, groups: [][]string{ids(poisson)}},
		{name: "ties", w: tied, groups: [][]string{{"a", "b"}, {"d", "e"}, {"c", "f", "g"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := keys(tc.w)
			if got := tc.w.Order(42, 0); got != tc.w {
				t.Fatal("order 0 is not the workload itself")
			}
			a, again, other := tc.w.Order(42, 1), tc.w.Order(42, 1), tc.w.Order(42, 2)
			if !slices.Equal(keys(tc.w), before) {
				t.Fatal("shuffling changed the workload it was given")
			}
			for _, s := range []*Workload{a, other} {
				if err := s.Validate(); err != nil {
					t.Fatal(err)
				}
				// same multiset of requests
				got, want := keys(s), slices.Clone(before)
				slices.Sort(got)
				slices.Sort(want)
				if !slices.Equal(got, want) {
					t.Fatal("the shuffle does not hold the same requests")
				}
				// same launch time at every slot
				for i := range s.Requests {
					if s.Requests[i].At != tc.w.Requests[i].At {
						t.Fatalf("slot %d: launch time %v, was %v", i, s.Requests[i].At, tc.w.Requests[i].At)
					}
				}
				// requests stay in their group
				slot := map[string]int{}
				for i, r := range s.Requests {
					slot[r.ID] = i
				}
				for _, g := range tc.groups {
					var was, now []int
					for _, id := range g {
						was = append(was, slices.Index(ids(tc.w), id))
						now = append(now, slot[id])
					}
					slices.Sort(was)
					slices.Sort(now)
					if !slices.Equal(was, now) {
						t.Fatalf("group %v left its slots %v for %v", g, was, now)
					}
				}
			}
			if !slices.Equal(ids(a), ids(again)) {
				t.Fatal("the same seed gave two orders")
			}
			if slices.Equal(ids(a), ids(tc.w)) || slices.Equal(ids(a), ids(other)) {
				t.Fatal("orders 0, 1 and 2 are not all different")
			}
		})
	}
}

func TestShuffleMovesSeedsAndBurst(t *testing.T) {
	w := smallReferenceCommand(t)
	s := w.Order(42, 3)
	seedsMoved, burstMoved := 0, 0
	for i := range w.Requests {
		if s.Requests[i].ID != w.Requests[i].ID {
			if i < 40 {
				seedsMoved++
			} else {
				burstMoved++
			}
		}
	}
	// a fixed seed: most of each part moves
	if seedsMoved < 30 || burstMoved < 30 {
		t.Fatalf("moved %d of 40 seeds, %d of 40 burst requests", seedsMoved, burstMoved)
	}
}

func TestOrderSeed(t *testing.T) {
	seen := map[int64]int{}
	for _, seed := range []int64{0, 1, 42} {
		if OrderSeed(seed, 0) != seed {
			t.Fatalf("order 0 of seed %d has seed %d", seed, OrderSeed(seed, 0))
		}
		for k := 1; k < 50; k++ {
			s := OrderSeed(seed, k)
			if s != OrderSeed(seed, k) {
				t.Fatal("OrderSeed is not deterministic")
			}
			if _, dup := seen[s]; dup {
				t.Fatalf("seed %d order %d repeats a seed", seed, k)
			}
			seen[s] = k
		}
	}
}
