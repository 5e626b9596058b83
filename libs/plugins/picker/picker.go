// Package picker holds the pickers: max-score-picker, random-picker,
// weighted-random-picker and round-robin-picker. Each returns up to maxNumOfEndpoints targets; the
// first serves the request, the others are fallbacks.
package picker

import (
	"context"
	"encoding/json"
	"math"

	"github.com/hermod/hermod/libs/scheduling"
)

// Registered plugin types.
const (
	MaxScoreType       = "max-score-picker"
	RandomType         = "random-picker"
	WeightedRandomType = "weighted-random-picker"
)

func init() {
	scheduling.Register(scheduling.Registration{Type: MaxScoreType, New: newFactory(MaxScoreType, func(p base) scheduling.Plugin { return &MaxScore{p} })})
	scheduling.Register(scheduling.Registration{Type: RandomType, New: newFactory(RandomType, func(p base) scheduling.Plugin { return &Random{p} })})
	scheduling.Register(scheduling.Registration{Type: WeightedRandomType, New: newFactory(WeightedRandomType, func(p base) scheduling.Plugin { return &WeightedRandom{p} })})
}

// Params are the parameters every picker takes.
type Params struct {
	// MaxNumOfEndpoints is how many targets to return (default 1).
	MaxNumOfEndpoints int `json:"maxNumOfEndpoints"`
}

type base struct {
	scheduling.Named
	params Params
}

func (b *base) Parameters() any { return b.params }

func newFactory(typ string, mk func(base) scheduling.Plugin) scheduling.Factory {
	return func(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
		p := Params{MaxNumOfEndpoints: 1}
		if err := scheduling.DecodeParameters(raw, &p, h); err != nil {
			return nil, err
		}
		if p.MaxNumOfEndpoints < 1 {
			return nil, scheduling.ParamErrorf("maxNumOfEndpoints", "must be at least 1 (got %d)", p.MaxNumOfEndpoints)
		}
		return mk(base{Named: scheduling.Named{Type: typ, Name: name}, params: p}), nil
	}
}

// MaxScore picks the highest totals; equal totals are ordered uniformly at
// random.
type MaxScore struct{ base }

// Pick implements scheduling.Picker.
func (p *MaxScore) Pick(_ context.Context, cs *scheduling.CycleState, _ *scheduling.Request, eps []*scheduling.Endpoint, totals []float64, dst []int) []int {
	return topK(cs, totals, p.params.MaxNumOfEndpoints, dst)
}

// Random picks endpoints uniformly at random, ignoring scores.
type Random struct{ base }

// Pick implements scheduling.Picker.
func (p *Random) Pick(_ context.Context, cs *scheduling.CycleState, _ *scheduling.Request, eps []*scheduling.Endpoint, _ []float64, dst []int) []int {
	return randomK(cs, len(eps), p.params.MaxNumOfEndpoints, dst)
}

// WeightedRandom samples endpoints with probability proportional to their
// total score, without replacement (A-Res: key = U^(1/score), top keys win).
// Endpoints scoring <= 0 get key 0 and fill remaining places in random
// order; when every score is <= 0 it picks uniformly.
type WeightedRandom struct{ base }

// Pick implements scheduling.Picker.
func (p *WeightedRandom) Pick(_ context.Context, cs *scheduling.CycleState, _ *scheduling.Request, eps []*scheduling.Endpoint, totals []float64, dst []int) []int {
	n := len(eps)
	keys := cs.ScratchFloat64s(n)
	rng := cs.Rand()
	positive := false
	for i, t := range totals {
		if t > 0 && !math.IsInf(t, 0) {
			// U^(1/t) compared through its logarithm ln(U)/t, which orders
			// the same way and cannot underflow to 0 for small t.
			u := 1 - rng.Float64() // (0, 1]
			keys[i] = math.Log(u) / t
			positive = true
		} else {
			keys[i] = math.Inf(-1)
		}
	}
	if !positive {
		return randomK(cs, n, p.params.MaxNumOfEndpoints, dst)
	}
	return topK(cs, keys, p.params.MaxNumOfEndpoints, dst)
}

// topK appends the indexes of the k largest values, largest first, ties in
// uniformly random order. A tie key is drawn only for endpoints that compete
// for a place, so scoring 1000 endpoints for k = 1 costs one pass.
func topK(cs *scheduling.CycleState, vals []float64, k int, dst []int) []int {
	n := len(vals)
	if k > n {
		k = n
	}
	if k <= 0 {
		return dst
	}
	rng := cs.Rand()
	if k == 1 {
		best, ties := -1, 0
		for i, v := range vals {
			switch {
			case best < 0 || v > vals[best]:
				best, ties = i, 1
			case v == vals[best]:
				// reservoir sampling over the tied maxima
				ties++
				if rng.IntN(ties) == 0 {
					best = i
				}
			}
		}
		return append(dst, best)
	}
	// keys[i] is the tie-break key of i (0 = not drawn yet); drawn keys have
	// their top bit set so 0 stays free.
	keys := cs.ScratchUint64s(n)
	key := func(i int) uint64 {
		if keys[i] == 0 {
			keys[i] = rng.Uint64() | 1<<63
		}
		return keys[i]
	}
	better := func(i, j int) bool {
		if vals[i] != vals[j] {
			return vals[i] > vals[j]
		}
		return key(i) > key(j)
	}
	start := len(dst)
	for i := range vals {
		top := dst[start:]
		if len(top) == k && !better(i, top[k-1]) {
			continue
		}
		if len(top) < k {
			dst = append(dst, i)
		} else {
			dst[len(dst)-1] = i
		}
		// insertion sort step: move i up to its place
		for j := len(dst) - 1; j > start && better(dst[j], dst[j-1]); j-- {
			dst[j], dst[j-1] = dst[j-1], dst[j]
		}
	}
	return dst
}

// randomK appends k distinct indexes in [0, n) chosen uniformly.
func randomK(cs *scheduling.CycleState, n, k int, dst []int) []int {
	if k > n {
		k = n
	}
	rng := cs.Rand()
	if k == 1 {
		return append(dst, rng.IntN(n))
	}
	perm := cs.ScratchIndices(n)
	for i := 0; i < k; i++ {
		j := i + rng.IntN(n-i)
		perm[i], perm[j] = perm[j], perm[i]
	}
	return append(dst, perm[:k]...)
}
