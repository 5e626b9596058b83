package prefix_test

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hermod/hermod/libs/plugins/prefix"
	"github.com/hermod/hermod/libs/scheduling"
)

// text returns n blocks of blockChars characters, block i starting with
// "tag i".
func text(tag string, n, blockChars int) []byte {
	var b strings.Builder
	for i := range n {
		blk := fmt.Sprintf("%s %d|", tag, i)
		if len(blk) > blockChars {
			panic("block too small for its tag")
		}
		b.WriteString(blk)
		b.WriteString(strings.Repeat(".", blockChars-len(blk)))
	}
	return []byte(b.String())
}

func TestHashesBlockCount(t *testing.T) {
	const bc = 16
	full := text("t", 8, bc)
	cases := []struct {
		text      []byte
		maxBlocks int
		want      int
	}{
		{full, 256, 8},
		{full[:len(full)-1], 256, 7},
		{append(slices.Clone(full), "partial"...), 256, 8},
		{full[:bc], 256, 1},
		{full[:bc-1], 256, 0},
		{nil, 256, 0},
		{full, 3, 3},
		{full, 8, 8},
		{full, 0, 0},
	}
	for _, c := range cases {
		if got := prefix.Hashes("m", c.text, bc, c.maxBlocks, nil); len(got) != c.want {
			t.Errorf("%d chars, maxBlocks %d: %d hashes, want %d", len(c.text), c.maxBlocks, len(got), c.want)
		}
	}
	for _, bad := range []int{0, -1} {
		if got := prefix.Hashes("m", full, bad, 256, nil); len(got) != 0 {
			t.Errorf("blockChars %d: %d hashes, want none", bad, len(got))
		}
	}
}

func TestHashesAppendToDst(t *testing.T) {
	full := text("t", 4, 16)
	want := prefix.Hashes("m", full, 16, 256, nil)
	dst := []uint64{1, 2}
	got := prefix.Hashes("m", full, 16, 256, dst)
	if !slices.Equal(got[:2], []uint64{1, 2}) || !slices.Equal(got[2:], want) {
		t.Errorf("Hashes appended %v to [1 2], want %v after them", got, want)
	}
	// Capped blocks are a prefix of the full chain.
	if got := prefix.Hashes("m", full, 16, 2, nil); !slices.Equal(got, want[:2]) {
		t.Errorf("maxBlocks 2 = %v, want %v", got, want[:2])
	}
}

func TestHashesChained(t *testing.T) {
	const bc = 32
	base := text("doc", 8, bc)
	h := prefix.Hashes("model-a", base, bc, 256, nil)
	if again := prefix.Hashes("model-a", slices.Clone(base), bc, 256, nil); !slices.Equal(h, again) {
		t.Fatalf("not deterministic: %v vs %v", h, again)
	}
	// Same prefix -> same leading hashes.
	longer := append(slices.Clone(base[:3*bc]), text("other", 5, bc)...)
	hl := prefix.Hashes("model-a", longer, bc, 256, nil)
	if !slices.Equal(hl[:3], h[:3]) {
		t.Errorf("shared 3-block prefix: leading hashes differ")
	}
	for i := 3; i < 8; i++ {
		if hl[i] == h[i] {
			t.Errorf("block %d differs but hash is equal", i)
		}
	}
	// Changing block i changes hashes i.. but none before.
	for i := range 8 {
		mod := slices.Clone(base)
		mod[i*bc+bc-1] = '#'
		hm := prefix.Hashes("model-a", mod, bc, 256, nil)
		for j := range 8 {
			if j < i && hm[j] != h[j] {
				t.Errorf("changing block %d changed hash %d", i, j)
			}
			if j >= i && hm[j] == h[j] {
				t.Errorf("changing block %d left hash %d unchanged", i, j)
			}
		}
	}
	// Different model -> different hashes everywhere.
	hb := prefix.Hashes("model-b", base, bc, 256, nil)
	for i := range h {
		if hb[i] == h[i] {
			t.Errorf("models a and b share hash %d", i)
		}
	}
	// Identical blocks at different positions hash differently (chained).
	same := []byte(strings.Repeat(strings.Repeat("z", bc), 6))
	hs := prefix.Hashes("model-a", same, bc, 256, nil)
	seen := map[uint64]bool{}
	for _, v := range hs {
		if seen[v] {
			t.Errorf("repeated block content gave a repeated hash: %v", hs)
		}
		seen[v] = true
	}
}

var stamps atomic.Int64

// next returns a stamp newer than every earlier one.
func next() scheduling.Stamp {
	n := stamps.Add(1)
	return scheduling.Stamp{Nanos: n, ID: uint64(n)}
}

// add records hashes as the newest decision, capacity as both the effect's
// and the default.
func add(x *prefix.Index, ep string, capacity int, hashes []uint64) {
	x.Add(ep, capacity, capacity, hashes, next())
}

func match(x *prefix.Index, hashes []uint64) map[string]int {
	var out scheduling.PrefixMatch
	x.Match(hashes, &out)
	return out.Matched()
}

func chain(tag string, n int) []uint64 {
	return prefix.Hashes("m", text(tag, n, 32), 32, 256, nil)
}

func TestIndexAddMatch(t *testing.T) {
	x := prefix.NewIndex()
	a := chain("a", 10)
	if got := match(x, a); len(got) != 0 {
		t.Errorf("empty index matched %v", got)
	}
	add(x, "pod-1", 100, a)
	add(x, "pod-2", 100, a[:3])
	if got, want := match(x, a), map[string]int{"pod-1": 10, "pod-2": 3}; !maps.Equal(got, want) {
		t.Errorf("Match(a) = %v, want %v", got, want)
	}
	if got, want := match(x, a[:5]), map[string]int{"pod-1": 5, "pod-2": 3}; !maps.Equal(got, want) {
		t.Errorf("Match(a[:5]) = %v, want %v", got, want)
	}
	// A chain sharing the first 5 blocks.
	b := append(slices.Clone(a[:5]), chain("b", 5)...)
	if got, want := match(x, b), map[string]int{"pod-1": 5, "pod-2": 3}; !maps.Equal(got, want) {
		t.Errorf("Match(b) = %v, want %v", got, want)
	}
	if got := match(x, chain("c", 4)); len(got) != 0 {
		t.Errorf("unrelated chain matched %v", got)
	}
	if got := match(x, nil); len(got) != 0 {
		t.Errorf("Match(nil) = %v", got)
	}
	if x.Blocks("pod-1") != 10 || x.Blocks("pod-2") != 3 || x.Blocks("pod-9") != 0 {
		t.Errorf("Blocks = %d, %d, %d; want 10, 3, 0", x.Blocks("pod-1"), x.Blocks("pod-2"), x.Blocks("pod-9"))
	}
	// Adding nothing creates nothing; adding again counts nothing twice.
	add(x, "pod-3", 100, nil)
	add(x, "pod-1", 100, a)
	if x.Blocks("pod-3") != 0 || x.Blocks("pod-1") != 10 {
		t.Errorf("Blocks after no-op adds = %d, %d", x.Blocks("pod-3"), x.Blocks("pod-1"))
	}
}

func TestIndexMatchStopsAtFirstMissingBlock(t *testing.T) {
	x := prefix.NewIndex()
	a := chain("a", 6)
	add(x, "gap", 100, []uint64{a[0], a[1], a[3], a[4], a[5]})
	add(x, "no-first", 100, a[1:])
	add(x, "first-only", 100, a[:1])
	want := map[string]int{"gap": 2, "first-only": 1}
	if got := match(x, a); !maps.Equal(got, want) {
		t.Errorf("Match = %v, want %v", got, want)
	}
}

// Blocks are inserted last-first so that a request's block 0 is its most
// recently used; the least recently used blocks are evicted first.
func TestIndexLRUEviction(t *testing.T) {
	x := prefix.NewIndex()
	a, b := chain("a", 4), chain("b", 2)
	add(x, "pod", 4, a)
	add(x, "pod", 4, b) // evicts a[3] then a[2]
	if got := x.Blocks("pod"); got != 4 {
		t.Errorf("Blocks = %d, want 4", got)
	}
	if got := match(x, a)["pod"]; got != 2 {
		t.Errorf("Match(a) = %d, want 2 (a[2], a[3] evicted)", got)
	}
	if got := match(x, b)["pod"]; got != 2 {
		t.Errorf("Match(b) = %d, want 2", got)
	}

	// A request longer than the capacity keeps its beginning.
	y := prefix.NewIndex()
	long := chain("long", 10)
	add(y, "pod", 3, long)
	if got := match(y, long)["pod"]; got != 3 || y.Blocks("pod") != 3 {
		t.Errorf("capacity 3, 10 blocks: Match = %d, Blocks = %d; want 3, 3", got, y.Blocks("pod"))
	}
}

func TestIndexAddRefreshesRecency(t *testing.T) {
	x := prefix.NewIndex()
	a := chain("a", 3) // recency after Add: a0 > a1 > a2
	add(x, "pod", 3, a)
	add(x, "pod", 3, a[2:]) // a2 > a0 > a1
	add(x, "pod", 3, chain("b", 1))
	// a1 was the least recently used.
	if got := match(x, a)["pod"]; got != 1 {
		t.Errorf("Match(a) = %d, want 1 (a1 evicted)", got)
	}
	add(x, "pod", 3, []uint64{a[1]}) // a1 > b0 > a2 (a0 evicted)
	add(x, "pod", 3, a[:1])          // a0 > a1 > b0 (a2 evicted)
	if got := match(x, a)["pod"]; got != 2 {
		t.Errorf("Match(a) = %d, want 2", got)
	}
}

// An endpoint's capacity is the one carried by the latest (by stamp)
// effect that carries one; an effect without one keeps it.
func TestIndexCapacityFollowsTheLatestEffect(t *testing.T) {
	x := prefix.NewIndex()
	add(x, "pod", 2, chain("a", 5))
	x.Add("pod", 0, 100, chain("b", 5), next())
	if got := x.Blocks("pod"); got != 2 {
		t.Errorf("Blocks = %d, want 2 (no capacity in the effect)", got)
	}
	x.Add("pod", 3, 100, chain("c", 5), next())
	if got := x.Blocks("pod"); got != 3 {
		t.Errorf("Blocks = %d, want 3", got)
	}
	x.Add("pod", 1, 100, chain("d", 5), scheduling.Stamp{Nanos: 1})
	if got := x.Blocks("pod"); got != 3 {
		t.Errorf("an older effect's capacity applied: Blocks = %d, want 3", got)
	}
	// A capacity below 1 still holds one block.
	x.Add("tiny", 0, 0, chain("c", 3), next())
	if got := x.Blocks("tiny"); got != 1 {
		t.Errorf("capacity 0: Blocks = %d, want 1", got)
	}
}

// Replicas apply the same effects in different orders, some twice: they
// hold the same blocks.
func TestIndexIsOrderIndependent(t *testing.T) {
	type effect struct {
		ep     string
		hashes []uint64
		st     scheduling.Stamp
	}
	rng := rand.New(rand.NewPCG(3, 4))
	var effects []effect
	var chains [][]uint64
	for i := range 400 {
		c := chain(fmt.Sprint("conv-", rng.IntN(30)), 1+rng.IntN(12))
		chains = append(chains, c)
		effects = append(effects, effect{fmt.Sprint("pod-", rng.IntN(3)), c, scheduling.Stamp{Nanos: int64(rng.IntN(50)), ID: uint64(i)}})
	}
	build := func(order []int) *prefix.Index {
		x := prefix.NewIndex()
		for _, i := range order {
			e := effects[i]
			x.Add(e.ep, 40, 40, e.hashes, e.st)
		}
		return x
	}
	inOrder := make([]int, len(effects))
	for i := range inOrder {
		inOrder[i] = i
	}
	shuffled := slices.Clone(inOrder)
	rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	shuffled = append(shuffled, shuffled[:100]...) // redeliveries
	a, b := build(inOrder), build(shuffled)
	for _, ep := range []string{"pod-0", "pod-1", "pod-2"} {
		if a.Blocks(ep) != b.Blocks(ep) {
			t.Fatalf("%s: %d vs %d blocks", ep, a.Blocks(ep), b.Blocks(ep))
		}
	}
	for _, c := range chains {
		if ma, mb := match(a, c), match(b, c); !maps.Equal(ma, mb) {
			t.Fatalf("match %v vs %v", ma, mb)
		}
	}
}

func TestIndexSharedBlocks(t *testing.T) {
	x := prefix.NewIndex()
	a := chain("a", 4)
	add(x, "pod-1", 4, a)
	add(x, "pod-2", 4, a)
	add(x, "pod-1", 4, chain("b", 4)) // pod-1 forgets a entirely
	if got, want := match(x, a), map[string]int{"pod-2": 4}; !maps.Equal(got, want) {
		t.Errorf("Match(a) = %v, want %v", got, want)
	}
}

func TestIndexRemoveEndpoint(t *testing.T) {
	x := prefix.NewIndex()
	a, b := chain("a", 5), chain("b", 5)
	add(x, "pod-1", 10, a)
	add(x, "pod-2", 10, a[:2])
	x.RemoveEndpoint("pod-1")
	x.RemoveEndpoint("pod-1")
	x.RemoveEndpoint("never-seen")
	if x.Blocks("pod-1") != 0 {
		t.Errorf("Blocks(pod-1) = %d after removal", x.Blocks("pod-1"))
	}
	if got, want := match(x, a), map[string]int{"pod-2": 2}; !maps.Equal(got, want) {
		t.Errorf("Match(a) = %v, want %v", got, want)
	}
	// A new endpoint (which may reuse pod-1's slot) does not inherit its blocks.
	add(x, "pod-3", 10, b)
	if got, want := match(x, a), map[string]int{"pod-2": 2}; !maps.Equal(got, want) {
		t.Errorf("after adding pod-3: Match(a) = %v, want %v", got, want)
	}
	if got, want := match(x, b), map[string]int{"pod-3": 5}; !maps.Equal(got, want) {
		t.Errorf("Match(b) = %v, want %v", got, want)
	}
	// pod-1 comes back empty, with a fresh capacity.
	add(x, "pod-1", 2, b)
	if got, want := match(x, b), map[string]int{"pod-1": 2, "pod-3": 5}; !maps.Equal(got, want) {
		t.Errorf("Match(b) = %v, want %v", got, want)
	}
}

// More holders of a block than the matcher's inline buffers.
func TestIndexManyEndpoints(t *testing.T) {
	x := prefix.NewIndex()
	a := chain("a", 64)
	want := map[string]int{}
	for i := range 50 {
		name := fmt.Sprintf("pod-%02d", i)
		n := 1 + i%40
		add(x, name, 1000, a[:n])
		want[name] = n
	}
	if got := match(x, a); !maps.Equal(got, want) {
		t.Errorf("Match = %v, want %v", got, want)
	}
}

// modelIndex is a straightforward reference: per endpoint, a slice of
// hashes from most to least recently used.
type modelIndex struct {
	lru map[string][]uint64
	cap map[string]int
}

func (m *modelIndex) add(ep string, capacity int, hashes []uint64) {
	if len(hashes) == 0 {
		return
	}
	// The latest capacity given wins; a new endpoint given none holds one.
	if capacity > 0 {
		m.cap[ep] = capacity
	} else if _, ok := m.cap[ep]; !ok {
		m.cap[ep] = 1
	}
	l := m.lru[ep]
	if len(l) > m.cap[ep] {
		l = l[:m.cap[ep]]
	}
	for i := len(hashes) - 1; i >= 0; i-- {
		if j := slices.Index(l, hashes[i]); j >= 0 {
			l = slices.Delete(l, j, j+1)
		}
		l = slices.Insert(l, 0, hashes[i])
		if len(l) > m.cap[ep] {
			l = l[:m.cap[ep]]
		}
	}
	m.lru[ep] = l
}

func (m *modelIndex) match(hashes []uint64) map[string]int {
	out := map[string]int{}
	for ep, l := range m.lru {
		n := 0
		for n < len(hashes) && slices.Contains(l, hashes[n]) {
			n++
		}
		if n > 0 {
			out[ep] = n
		}
	}
	return out
}

func TestIndexMatchesModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	x := prefix.NewIndex()
	m := &modelIndex{lru: map[string][]uint64{}, cap: map[string]int{}}
	eps := []string{"a", "b", "c", "d", "e", "f"}
	randHashes := func() []uint64 {
		h := make([]uint64, 1+rng.IntN(8))
		for i := range h {
			h[i] = uint64(rng.IntN(24))
		}
		return h
	}
	for op := range 20000 {
		switch r := rng.IntN(100); {
		case r < 60:
			ep, c, h := eps[rng.IntN(len(eps))], rng.IntN(12), randHashes()
			add(x, ep, c, h)
			m.add(ep, c, h)
		case r < 63:
			ep := eps[rng.IntN(len(eps))]
			x.RemoveEndpoint(ep)
			delete(m.lru, ep)
			delete(m.cap, ep)
		default:
			h := randHashes()
			if got, want := match(x, h), m.match(h); !maps.Equal(got, want) {
				t.Fatalf("op %d: Match(%v) = %v, want %v", op, h, got, want)
			}
		}
		if op%50 == 0 {
			for _, ep := range eps {
				if got, want := x.Blocks(ep), len(m.lru[ep]); got != want {
					t.Fatalf("op %d: Blocks(%s) = %d, want %d", op, ep, got, want)
				}
			}
		}
	}
}

func TestIndexConcurrent(t *testing.T) {
	x := prefix.NewIndex()
	chains := make([][]uint64, 16)
	for i := range chains {
		chains[i] = chain(fmt.Sprint("c", i), 32)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				ep := fmt.Sprint("pod-", (g+i)%5)
				c := chains[(g*7+i)%len(chains)]
				switch i % 10 {
				case 0:
					x.RemoveEndpoint(ep)
				case 1, 2, 3:
					add(x, ep, 64, c)
				default:
					for name, n := range match(x, c) {
						if n < 1 || n > len(c) {
							t.Errorf("Match reported %d blocks for %s", n, name)
						}
					}
					_ = x.Blocks(ep)
				}
			}
		}()
	}
	wg.Wait()
}

func BenchmarkHashes(b *testing.B) {
	prompt := make([]byte, 4096)
	for i := range prompt {
		prompt[i] = byte('a' + i%26)
	}
	dst := make([]uint64, 0, 256)
	b.SetBytes(int64(len(prompt)))
	b.ReportAllocs()
	for b.Loop() {
		dst = prefix.Hashes("meta-llama/Llama-3.3-70B-Instruct", prompt, prefix.DefaultBlockSizeTokens*prefix.CharsPerToken, prefix.DefaultMaxPrefixBlocksToMatch, dst[:0])
	}
	if len(dst) != 4096/64 {
		b.Fatalf("%d hashes", len(dst))
	}
}

func BenchmarkIndexMatch(b *testing.B) {
	x := prefix.NewIndex()
	// 32 endpoints, each holding a shared 64-block system prompt followed
	// by 64 blocks of its own, and a few unrelated conversations.
	system := chain("system", 64)
	for e := range 32 {
		ep := fmt.Sprint("pod-", e)
		add(x, ep, prefix.DefaultLRUCapacityPerServer, append(slices.Clone(system), chain(ep, 64)...))
		for c := range 8 {
			add(x, ep, prefix.DefaultLRUCapacityPerServer, chain(fmt.Sprint(ep, "-conv-", c), 128))
		}
	}
	query := append(slices.Clone(system), chain("pod-7", 64)...)
	var out scheduling.PrefixMatch
	b.ReportAllocs()
	for b.Loop() {
		out.Clear()
		x.Match(query, &out)
	}
	if out.MatchedBlocks("pod-7") != 128 || out.MatchedBlocks("pod-0") != 64 {
		b.Fatalf("unexpected match %v", out.Matched())
	}
}

// MatchAny counts the hashes each endpoint holds wherever they are in the
// list; Holds answers for one.
func TestMatchAnyIsASetMatch(t *testing.T) {
	x := prefix.NewIndex()
	st := scheduling.StampOf(1, time.Unix(1, 0))
	x.Add("a", 0, 8, []uint64{1, 2, 3}, st)
	x.Add("b", 0, 8, []uint64{3, 9}, st)
	var m scheduling.PrefixMatch
	x.MatchAny([]uint64{9, 3, 7}, &m)
	if got := m.Matched(); len(got) != 2 || got["a"] != 1 || got["b"] != 2 {
		t.Errorf("matched %v, want a:1 b:2", got)
	}
	if !x.Holds("b", 9) || x.Holds("a", 9) || x.Holds("c", 1) {
		t.Error("Holds")
	}
}
