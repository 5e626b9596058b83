package burstprefix

import (
	"cmp"
	"slices"
)

// BalanceBy is the quantity a window's placement balances across replicas.
type BalanceBy string

// Balance modes.
const (
	// BalanceRequests balances by request count.
	BalanceRequests BalanceBy = "requests"
	// BalanceTokens balances by prefix blocks a replica must prefill: a
	// unit's prefix is charged once per replica, less the leading blocks a
	// unit already placed there shares with it.
	BalanceTokens BalanceBy = "tokens"
)

// Member is one request of a window.
type Member struct {
	// Hashes are the prompt's chained block hashes (equal at i implies
	// equal up to i).
	Hashes []uint64
	// Candidates are the endpoints the request may go to, in the order the
	// scheduler gave them.
	Candidates []string
	// Load is each candidate's load outside the window (waiting plus
	// running requests), which breaks ties between equally placed replicas.
	Load map[string]int
}

// Plan is how a window's units are placed.
type Plan struct {
	// MaxPerReplica caps the members of one unit on one replica (<= 0:
	// no cap).
	MaxPerReplica int
	// MinColocateBlocks is the leading blocks two requests must share for
	// a single request to form a unit and for a unit to join another's
	// replica (0: only identical prompts are placed, each by balance).
	MinColocateBlocks int
	// BalanceBy is what the placement balances.
	BalanceBy BalanceBy
}

// unit is a placement unit: members with an identical prompt prefix, or a
// single request sharing MinColocateBlocks leading blocks with another.
type unit struct {
	members   []int
	hashes    []uint64
	replicas  []string
	identical bool
}

// replicaState is what a window has placed on a replica so far.
type replicaState struct {
	load   int        // requests, or blocks with BalanceTokens
	outer  int        // load outside the window (tie break)
	placed [][]uint64 // hashes of the units placed there
}

// Assign places a window's members and returns, for each, the endpoint it
// is steered to ("" for a member that gains no affinity: no prefix, or
// sharing too little with the others).
func (pl Plan) Assign(members []Member) []string {
	out := make([]string, len(members))
	units := pl.units(members)
	if len(units) == 0 {
		return out
	}
	replicas := map[string]*replicaState{}
	total := 0
	for _, u := range units {
		for _, r := range u.replicas {
			if replicas[r] == nil {
				replicas[r] = &replicaState{outer: members[u.members[0]].Load[r]}
			}
		}
		total += pl.cost(u, len(u.members), nil)
	}
	fair := (total + len(replicas) - 1) / len(replicas)
	for _, u := range units {
		chunk := len(u.members)
		if pl.MaxPerReplica > 0 {
			chunk = pl.MaxPerReplica
		}
		var used []string
		for start := 0; start < len(u.members); start += chunk {
			part := u.members[start:min(start+chunk, len(u.members))]
			r := pl.choose(u, len(part), replicas, used, fair)
			used = append(used, r)
			st := replicas[r]
			st.load += pl.cost(u, len(part), st)
			st.placed = append(st.placed, u.hashes)
			for _, m := range part {
				out[m] = r
			}
		}
	}
	return out
}

// units groups the members: identical prompt prefixes of more than one
// member first, then (with MinColocateBlocks) single requests sharing that
// many leading blocks with another member; longer prefixes first within
// each kind, arrival order among equals.
func (pl Plan) units(members []Member) []*unit {
	type key struct {
		last uint64
		n    int
	}
	groups := map[key]*unit{}
	var order []*unit
	leading := map[uint64]int{} // hash of block MinColocateBlocks-1 -> members
	for i, m := range members {
		if len(m.Hashes) == 0 || len(m.Candidates) == 0 {
			continue
		}
		k := key{m.Hashes[len(m.Hashes)-1], len(m.Hashes)}
		u := groups[k]
		if u == nil {
			u = &unit{hashes: m.Hashes, replicas: m.Candidates}
			groups[k] = u
			order = append(order, u)
		} else {
			u.replicas = intersect(u.replicas, m.Candidates)
		}
		u.members = append(u.members, i)
		if c := pl.MinColocateBlocks; c > 0 && len(m.Hashes) >= c {
			leading[m.Hashes[c-1]]++
		}
	}
	units := order[:0]
	for _, u := range order {
		if len(u.replicas) == 0 {
			u.replicas = members[u.members[0]].Candidates
		}
		switch {
		case len(u.members) > 1:
			u.identical = true
			units = append(units, u)
		case pl.MinColocateBlocks > 0 && len(u.hashes) >= pl.MinColocateBlocks &&
			leading[u.hashes[pl.MinColocateBlocks-1]] > 1:
			units = append(units, u)
		}
	}
	slices.SortStableFunc(units, func(a, b *unit) int {
		if a.identical != b.identical {
			if a.identical {
				return -1
			}
			return 1
		}
		return cmp.Compare(len(b.hashes), len(a.hashes))
	})
	return units
}

// cost is what placing n members of u on a replica (nil: on none yet)
// adds to its load.
func (pl Plan) cost(u *unit, n int, st *replicaState) int {
	if pl.BalanceBy != BalanceTokens {
		return n
	}
	held := 0
	if st != nil {
		for _, p := range st.placed {
			held = max(held, sharedLeading(u.hashes, p))
		}
	}
	return len(u.hashes) - held
}

// choose picks the replica for n members of u: with MinColocateBlocks, the
// replica under its fair share holding the unit that shares the most
// leading blocks (at least MinColocateBlocks) with u; otherwise the least
// loaded replica the unit has not used yet (any, once it has used all).
func (pl Plan) choose(u *unit, n int, replicas map[string]*replicaState, used []string, fair int) string {
	if c := pl.MinColocateBlocks; c > 0 {
		best, bestShared := "", 0
		for _, r := range u.replicas {
			st := replicas[r]
			if st.load >= fair || slices.Contains(used, r) {
				continue
			}
			shared := 0
			for _, p := range st.placed {
				shared = max(shared, sharedLeading(u.hashes, p))
			}
			if shared >= c && (shared > bestShared || shared == bestShared && pl.lighter(u, n, r, best, replicas)) {
				best, bestShared = r, shared
			}
		}
		if best != "" {
			return best
		}
	}
	best := ""
	for _, r := range u.replicas {
		if slices.Contains(used, r) {
			continue
		}
		if best == "" || pl.lighter(u, n, r, best, replicas) {
			best = r
		}
	}
	if best != "" {
		return best
	}
	for _, r := range u.replicas {
		if best == "" || pl.lighter(u, n, r, best, replicas) {
			best = r
		}
	}
	return best
}

// lighter reports whether r would be less loaded than best after taking n
// members of u: by the window's load, then the load outside it, then name.
func (pl Plan) lighter(u *unit, n int, r, best string, replicas map[string]*replicaState) bool {
	if best == "" {
		return true
	}
	a, b := replicas[r], replicas[best]
	if la, lb := a.load+pl.cost(u, n, a), b.load+pl.cost(u, n, b); la != lb {
		return la < lb
	}
	if a.outer != b.outer {
		return a.outer < b.outer
	}
	return r < best
}

// sharedLeading counts the leading blocks two chains share. Chained hashes
// are equal at i only if they are equal before i, so a binary search finds
// the first difference.
func sharedLeading(a, b []uint64) int {
	n := min(len(a), len(b))
	lo, hi := 0, n // the answer is in [lo, hi]
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if a[mid-1] == b[mid-1] {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}

func intersect(a, b []string) []string {
	var out []string
	for _, x := range a {
		if slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}
