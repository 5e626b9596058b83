package workload

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"
)

// OrderSeed derives the seed of arrival order k from a workload's seed:
// order 0 keeps the seed, every other order gets a seed of its own (a
// SplitMix64 mix of both), so that a benchmark's orders are reproducible
// from its one seed and do not repeat each other.
func OrderSeed(seed int64, k int) int64 {
	if k == 0 {
		return seed
	}
	x := uint64(seed) + uint64(k)*0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return int64(x ^ x>>31)
}

// Order returns arrival order k of w: order 0 is w itself, order k > 0
// is w.Shuffled(OrderSeed(seed, k)).
func (w *Workload) Order(seed int64, k int) *Workload {
	if k == 0 {
		return w
	}
	s := w.Shuffled(OrderSeed(seed, k))
	s.Summary = append(s.Summary, fmt.Sprintf("[Order] %d of workload seed %d", k, seed))
	return s
}

// Shuffled returns a copy of w with the same requests and the same launch
// times in another order, drawn from seed:
//
//   - requests that share a launch time (reference/000's heavy seeds, all
//     due at t=0) are permuted among themselves, so they leave in another
//     order;
//   - requests with a launch time of their own (the burst) are permuted
//     over those launch times: every time keeps its place, another
//     request goes at it.
//
// Every slot of the request list keeps its launch time, so the schedule
// (how many requests are due when) is unchanged; only which request is
// sent at each time changes. w is not modified.
func (w *Workload) Shuffled(seed int64) *Workload {
	out := &Workload{Name: w.Name, Requests: slices.Clone(w.Requests), Summary: slices.Clone(w.Summary)}
	at := make(map[time.Duration][]int, len(w.Requests))
	for i := range w.Requests {
		at[w.Requests[i].At] = append(at[w.Requests[i].At], i)
	}
	// groups in the order of their first request, then the singles: the
	// random stream is consumed in the same order on every call
	var groups [][]int
	var singles []int
	shared := 0
	for i := range w.Requests {
		switch g := at[w.Requests[i].At]; {
		case len(g) == 1:
			singles = append(singles, i)
		case g[0] == i:
			groups = append(groups, g)
			shared += len(g)
		}
	}
	groups = append(groups, singles)
	rng := rand.New(rand.NewPCG(uint64(seed), 0x5f0ff1e))
	for _, g := range groups {
		for j, p := range rng.Perm(len(g)) {
			slot := &out.Requests[g[j]]
			*slot = w.Requests[g[p]]
			slot.At = w.Requests[g[j]].At
		}
	}
	out.Summary = append(out.Summary, fmt.Sprintf("[Shuffle] seed %d: %d requests sharing launch times reordered, %d requests permuted over their own launch times",
		seed, shared, len(w.Requests)-shared))
	return out
}
