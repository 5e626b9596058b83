package index

import (
	"sync"

	"github.com/hermod/hermod/libs/kv/blockkey"
)

// Match is what a candidate pod holds of a prompt.
type Match struct {
	// Blocks is the length of the run of the prompt's blocks, from the
	// first, that the pod holds (confirmed or speculatively).
	Blocks int
	// Score is the sum over that run of each block's weight by the best
	// tier the pod holds it on (a speculative block weighs as GPU).
	Score float64
}

// matchScratch is a Match call's working memory.
type matchScratch struct {
	slot  []int32  // by pod id: the candidate index, or -1
	alive []int32  // candidates whose run goes on
	ids   []uint32 // pod ids whose slot is set
	hit   []uint8  // by candidate: best tier + 1 of the current block, 0 if none
}

var scratchPool = sync.Pool{New: func() any { return new(matchScratch) }}

// Match returns, for each candidate pod (by name, in order), the run of
// the prompt's block keys from the first that it holds, and its score.
// Speculative entries count until their expiry (now is Unix nanos).
// Unknown pods match nothing.
func (x *Index) Match(keys []blockkey.Key, candidates []string, now int64, dst []Match) []Match {
	dst = resize(dst, len(candidates))
	if len(keys) == 0 || len(candidates) == 0 {
		return dst
	}
	sc := scratchPool.Get().(*matchScratch)
	defer scratchPool.Put(sc)
	x.podsMu.RLock()
	npods := len(x.podNames)
	for len(sc.slot) < npods {
		sc.slot = append(sc.slot, -1)
	}
	sc.alive, sc.ids = sc.alive[:0], sc.ids[:0]
	var dups []int32 // candidates naming a pod listed earlier
	for c, name := range candidates {
		p := x.pods[name]
		if p == nil {
			continue
		}
		if sc.slot[p.id] >= 0 {
			dups = append(dups, int32(c))
			continue
		}
		sc.slot[p.id] = int32(c)
		sc.ids = append(sc.ids, p.id)
		sc.alive = append(sc.alive, int32(c))
	}
	x.podsMu.RUnlock()
	sc.hit = resize(sc.hit, len(candidates))
	w := x.cfg.Weights

	for _, k := range keys {
		if len(sc.alive) == 0 {
			break
		}
		hits := 0
		s := x.shardOf(k)
		s.mu.RLock()
		for _, r := range s.holders(k) {
			if int(r.pod) < len(sc.slot) {
				if c := sc.slot[r.pod]; c >= 0 {
					sc.hit[c] = uint8(r.tiers().best()) + 1
					hits++
				}
			}
		}
		s.mu.RUnlock()
		if hits < len(sc.alive) {
			ss := x.spec.shardOf(k)
			ss.mu.RLock()
			for _, r := range ss.refs[k] {
				if r.expires <= now || int(r.pod) >= len(sc.slot) {
					continue
				}
				if c := sc.slot[r.pod]; c >= 0 && sc.hit[c] == 0 {
					sc.hit[c] = uint8(TierGPU) + 1
				}
			}
			ss.mu.RUnlock()
		}
		kept := sc.alive[:0]
		for _, c := range sc.alive {
			if t := sc.hit[c]; t > 0 {
				dst[c].Blocks++
				dst[c].Score += w[t-1]
				sc.hit[c] = 0
				kept = append(kept, c)
			}
		}
		sc.alive = kept
	}
	for _, id := range sc.ids {
		sc.slot[id] = -1
	}
	for _, c := range dups {
		dst[c] = dst[firstIndex(candidates, candidates[c])]
	}
	return dst
}

// resize returns s with length n, zeroed, reusing its capacity.
func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	s = s[:n]
	clear(s)
	return s
}

func firstIndex(names []string, name string) int {
	for i, n := range names {
		if n == name {
			return i
		}
	}
	return -1
}
