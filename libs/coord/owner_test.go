package coord

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

const ownerKeys = 10000

func ownerTestKeys() []string {
	keys := make([]string, ownerKeys)
	for i := range keys {
		keys[i] = fmt.Sprintf("pool-%d/vllm-%d", i%7, i)
	}
	return keys
}

func memberNames(n int) []string {
	ms := make([]string, n)
	for i := range ms {
		ms[i] = fmt.Sprintf("collector-%d", i)
	}
	return ms
}

func assign(members, keys []string) map[string]string {
	owners := make(map[string]string, len(keys))
	for _, k := range keys {
		owners[k] = Owner(members, k)
	}
	return owners
}

func TestOwnerEdgeCases(t *testing.T) {
	if got := Owner(nil, "k"); got != "" {
		t.Fatalf("Owner(nil) = %q", got)
	}
	if got := Owner([]string{"only"}, "k"); got != "only" {
		t.Fatalf("Owner(one) = %q", got)
	}
	if Owns(nil, "", "k") || Owns([]string{"a"}, "", "k") {
		t.Fatal("the empty id owns a key")
	}
	if !Owns([]string{"a"}, "a", "k") || Owns([]string{"a"}, "b", "k") {
		t.Fatal("Owns disagrees with Owner")
	}
	// Duplicates change nothing.
	ms := memberNames(4)
	for _, k := range ownerTestKeys()[:500] {
		if Owner(ms, k) != Owner(append(slices.Clone(ms), ms...), k) {
			t.Fatalf("duplicates changed the owner of %s", k)
		}
	}
}

// Every caller agrees, whatever order it holds the members in.
func TestOwnerIndependentOfOrder(t *testing.T) {
	ms := memberNames(6)
	want := assign(ms, ownerTestKeys())
	rng := rand.New(rand.NewPCG(1, 2))
	for range 5 {
		shuffled := slices.Clone(ms)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		for k, owner := range assign(shuffled, ownerTestKeys()) {
			if want[k] != owner {
				t.Fatalf("order %v: %s owned by %s, want %s", shuffled, k, owner, want[k])
			}
		}
	}
}

// Over 10k keys every member owns its share within 10%.
func TestOwnerBalance(t *testing.T) {
	keys := ownerTestKeys()
	for n := 2; n <= 8; n++ {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			ms := memberNames(n)
			counts := map[string]int{}
			for _, owner := range assign(ms, keys) {
				counts[owner]++
			}
			share := float64(len(keys)) / float64(n)
			for _, m := range ms {
				if dev := (float64(counts[m]) - share) / share; dev > 0.10 || dev < -0.10 {
					t.Fatalf("%s owns %d keys, share %.0f (%+.1f%%): %v", m, counts[m], share, 100*dev, counts)
				}
			}
		})
	}
}

// A join moves about 1/N of the keys, all to the new member; a leave moves
// only the leaver's keys.
func TestOwnerMinimalMovement(t *testing.T) {
	keys := ownerTestKeys()
	for n := 2; n <= 8; n++ {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			before := memberNames(n)
			after := append(slices.Clone(before), "collector-new")
			was, now := assign(before, keys), assign(after, keys)
			moved := 0
			for _, k := range keys {
				if was[k] == now[k] {
					continue
				}
				moved++
				if now[k] != "collector-new" {
					t.Fatalf("join: %s moved from %s to %s, not to the new member", k, was[k], now[k])
				}
			}
			want := float64(len(keys)) / float64(n+1)
			if dev := (float64(moved) - want) / want; dev > 0.10 || dev < -0.10 {
				t.Fatalf("join moved %d keys, want about %.0f (%+.1f%%)", moved, want, 100*dev)
			}

			// The leave of member 0, from the n+1 set.
			leaver := after[0]
			left := assign(after[1:], keys)
			for _, k := range keys {
				if now[k] != leaver && left[k] != now[k] {
					t.Fatalf("leave of %s: %s moved from %s to %s", leaver, k, now[k], left[k])
				}
				if left[k] == leaver {
					t.Fatalf("leave: %s still owned by %s", k, leaver)
				}
			}
		})
	}
}

func BenchmarkOwner(b *testing.B) {
	for _, n := range []int{3, 16} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			ms := memberNames(n)
			keys := ownerTestKeys()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				_ = Owner(ms, keys[i%len(keys)])
				i++
			}
		})
	}
}
