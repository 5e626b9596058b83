package burstprefix

import (
	"fmt"
	"slices"
	"testing"
)

// chain builds the block hashes of a prompt whose blocks are named by
// parts: equal leading parts give equal leading hashes.
func chain(parts ...string) []uint64 {
	out := make([]uint64, len(parts))
	var h uint64 = 1469598103934665603
	for i, p := range parts {
		for _, c := range []byte(p) {
			h = (h ^ uint64(c)) * 1099511628211
		}
		out[i] = h
	}
	return out
}

func replicas(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("r%d", i)
	}
	return out
}

func members(n int, hashes []uint64, cands []string) []Member {
	out := make([]Member, n)
	for i := range out {
		out[i] = Member{Hashes: hashes, Candidates: cands}
	}
	return out
}

func counts(assign []string) map[string]int {
	c := map[string]int{}
	for _, a := range assign {
		c[a]++
	}
	return c
}

func TestIdenticalGroupGoesToOneReplica(t *testing.T) {
	got := Plan{}.Assign(members(6, chain("sys", "q1"), replicas(4)))
	if c := counts(got); len(c) != 1 || c[""] != 0 {
		t.Fatalf("assigned %v, want one replica for the group", got)
	}
}

func TestMaxPerReplicaSpillsToTheNextLeastLoaded(t *testing.T) {
	ms := members(5, chain("sys", "q1"), replicas(4))
	for i := range ms {
		ms[i].Load = map[string]int{"r0": 9, "r1": 0, "r2": 3, "r3": 1}
	}
	got := Plan{MaxPerReplica: 2}.Assign(ms)
	// 2 on the idlest (r1), 2 on the next (r3), the last on r2; r0, the
	// busiest outside the window, gets none.
	want := []string{"r1", "r1", "r3", "r3", "r2"}
	if !slices.Equal(got, want) {
		t.Fatalf("assigned %v, want %v", got, want)
	}
}

func TestDistinctGroupsAreBalanced(t *testing.T) {
	ms := append(members(3, chain("a", "a"), replicas(2)), members(3, chain("b", "b"), replicas(2))...)
	got := Plan{}.Assign(ms)
	if got[0] == got[3] || got[0] != got[1] || got[3] != got[5] {
		t.Fatalf("assigned %v, want each group whole on its own replica", got)
	}
}

func TestSinglesGainAffinityOnlyBySharingLeadingBlocks(t *testing.T) {
	ms := append(members(2, chain("sys", "tools", "q1"), replicas(2)),
		Member{Hashes: chain("sys", "tools", "q2"), Candidates: replicas(2)}, // shares 2 blocks with the group
		Member{Hashes: chain("other", "x", "y"), Candidates: replicas(2)},    // shares none
		Member{Candidates: replicas(2)},                                      // no prefix
	)
	ms = append(ms, members(3, chain("b", "b", "b"), replicas(2))...)
	if got := (Plan{}).Assign(ms); got[2] != "" || got[3] != "" || got[4] != "" || got[0] == "" || got[5] == "" {
		t.Fatalf("minColocateBlocks 0: assigned %v, want only the identical groups placed", got)
	}
	got := Plan{MinColocateBlocks: 2}.Assign(ms)
	if got[2] != got[0] || got[0] == got[5] {
		t.Errorf("minColocateBlocks 2: assigned %v, want the request sharing 2 blocks beside its group", got)
	}
	if got[3] != "" || got[4] != "" {
		t.Errorf("minColocateBlocks 2: assigned %v, want no affinity for the unrelated and the prefix-less", got)
	}
	if got := (Plan{MinColocateBlocks: 3}).Assign(ms); got[2] != "" {
		t.Errorf("minColocateBlocks 3: the request sharing only 2 blocks went to %q", got[2])
	}
}

func TestColocationStopsAtTheFairShare(t *testing.T) {
	// Four requests sharing a two-block system prompt, on two replicas:
	// co-location fills r-x up to its fair share (2), then balance places
	// the rest on the other replica.
	var ms []Member
	for i := range 4 {
		ms = append(ms, Member{Hashes: chain("sys", "tools", fmt.Sprint("q", i)), Candidates: replicas(2)})
	}
	got := Plan{MinColocateBlocks: 2}.Assign(ms)
	if c := counts(got); c["r0"] != 2 || c["r1"] != 2 {
		t.Fatalf("assigned %v, want 2 per replica", got)
	}
}

func TestBalanceByTokensSpreadsLongPrefixes(t *testing.T) {
	long := chain("1", "2", "3", "4", "5", "6", "7", "8", "9", "10")
	ms := append(members(2, long, replicas(2)), members(2, chain("b", "b", "b"), replicas(2))...)
	ms = append(ms, members(2, chain("c", "c", "c"), replicas(2))...)
	byRequests := Plan{}.Assign(ms)
	byTokens := Plan{BalanceBy: BalanceTokens}.Assign(ms)
	// By requests the third group ties (2 and 2) and goes by name beside
	// the long one; by tokens it joins the short group (3 < 10 blocks).
	if byRequests[4] != byRequests[0] {
		t.Errorf("by requests: %v", byRequests)
	}
	if byTokens[4] != byTokens[2] || byTokens[4] == byTokens[0] {
		t.Errorf("by tokens: %v, want the two short groups together", byTokens)
	}
}

func TestUnitKeepsToItsCandidates(t *testing.T) {
	ms := members(3, chain("p", "q"), []string{"r2", "r3"})
	ms[1].Candidates = []string{"r3"}
	got := Plan{}.Assign(ms)
	if c := counts(got); c["r3"] != 3 {
		t.Fatalf("assigned %v, want all on r3, the only replica every member may use", got)
	}
}

func TestSharedLeading(t *testing.T) {
	a := chain("1", "2", "3", "4")
	for _, tc := range []struct {
		b    []uint64
		want int
	}{
		{nil, 0},
		{chain("x"), 0},
		{chain("1"), 1},
		{chain("1", "2", "x", "4"), 2},
		{chain("1", "2", "3"), 3},
		{chain("1", "2", "3", "4", "5"), 4},
	} {
		if got := sharedLeading(a, tc.b); got != tc.want {
			t.Errorf("sharedLeading with %d blocks: %d, want %d", len(tc.b), got, tc.want)
		}
		if got := sharedLeading(tc.b, a); got != tc.want {
			t.Errorf("sharedLeading reversed: %d, want %d", got, tc.want)
		}
	}
}
