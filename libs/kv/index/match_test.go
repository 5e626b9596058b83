package index

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hermod/hermod/libs/kv/events"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// A prompt of 4 blocks; pod-a holds blocks 0-2 on GPU, pod-b holds 0-1
// with block 1 on CPU, pod-c holds block 1 only (no run from block 0).
func TestMatchCountsTheRunFromTheFirstBlock(t *testing.T) {
	x := newIndex(t, Config{BlockSize: 4})
	prompt := seq(0, 16)
	keys := x.Keyer().Prompt(nil, model, prompt)
	x.Apply("pod-a", model, batch(stored([]uint64{1, 2, 3}, 0, false, prompt[:12], 4, "")))
	x.Apply("pod-b", model, batch(stored([]uint64{1}, 0, false, prompt[:4], 4, "GPU"), stored([]uint64{2}, 1, true, prompt[4:8], 4, "CPU")))
	x.Apply("pod-c", model, batch(stored([]uint64{1}, 0, false, prompt[:4], 4, ""), stored([]uint64{2}, 1, true, prompt[4:8], 4, ""), removed("", 1)))
	got := x.Match(keys, []string{"pod-a", "pod-b", "pod-c", "pod-unknown"}, 0, nil)
	want := []Match{{3, 3}, {2, 1.8}, {0, 0}, {0, 0}}
	for i := range want {
		if got[i].Blocks != want[i].Blocks || !near(got[i].Score, want[i].Score) {
			t.Fatalf("match %v, want %v", got, want)
		}
	}
	// another model's prompt with the same tokens matches nothing
	other := x.Keyer().Prompt(nil, "other-model", prompt)
	for _, m := range x.Match(other, []string{"pod-a"}, 0, nil) {
		if m.Blocks != 0 {
			t.Fatalf("another model matched %+v", m)
		}
	}
	// a candidate named twice gets the same answer twice
	if m := x.Match(keys, []string{"pod-a", "pod-a"}, 0, nil); m[1] != m[0] || m[0].Blocks != 3 {
		t.Fatalf("duplicate candidates: %v", m)
	}
}

func TestLoRABlocksChainFromTheAdapter(t *testing.T) {
	x := newIndex(t, Config{BlockSize: 4})
	prompt := seq(0, 8)
	ev := stored([]uint64{1, 2}, 0, false, prompt, 4, "")
	ev.LoRAName = "sql-adapter"
	x.Apply("pod-a", model, batch(ev))
	if m := x.Match(x.Keyer().Prompt(nil, "sql-adapter", prompt), []string{"pod-a"}, 0, nil); m[0].Blocks != 2 {
		t.Fatalf("adapter prompt matched %+v", m)
	}
	if m := x.Match(x.Keyer().Prompt(nil, model, prompt), []string{"pod-a"}, 0, nil); m[0].Blocks != 0 {
		t.Fatalf("base-model prompt matched adapter blocks: %+v", m)
	}
}

// An engine block of 32 tokens is two index blocks of 16; removing it
// removes both.
func TestEngineBlocksLargerThanIndexBlocks(t *testing.T) {
	x := newIndex(t, Config{BlockSize: 16})
	prompt := seq(0, 64)
	st := x.Apply("pod-a", model, batch(stored([]uint64{7, 8}, 0, false, prompt, 32, "")))
	if st.Stored != 4 || x.Len() != 4 {
		t.Fatalf("stored %+v, %d keys", st, x.Len())
	}
	keys := x.Keyer().Prompt(nil, model, prompt)
	if m := x.Match(keys, []string{"pod-a"}, 0, nil); m[0].Blocks != 4 {
		t.Fatalf("match %+v", m)
	}
	st = x.Apply("pod-a", model, batch(removed("", 8)))
	if st.Removed != 2 || x.Len() != 2 {
		t.Fatalf("removed %+v, %d keys left", st, x.Len())
	}
	if st := x.Apply("pod-a", model, batch(stored([]uint64{9}, 0, false, seq(0, 24), 24, ""))); st.Malformed != 1 {
		t.Fatalf("engine block of 24 on index blocks of 16: %+v", st)
	}
	if st := x.Apply("pod-a", model, batch(stored([]uint64{9}, 0, false, seq(0, 20), 16, ""))); st.Malformed != 1 {
		t.Fatalf("token count not blocks x block size: %+v", st)
	}
}

func TestSizeAndPodCacheBounds(t *testing.T) {
	x := newIndex(t, Config{BlockSize: 1, Size: 8, PodCacheSize: 2, Shards: 1})
	// 12 single-token blocks chained: the 8 most recent stay
	x.Apply("pod-a", model, batch(stored([]uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, 0, false, seq(0, 12), 1, "")))
	if x.Len() != 8 || x.Evicted() != 4 {
		t.Fatalf("%d keys, %d evicted", x.Len(), x.Evicted())
	}
	keys := x.Keyer().Prompt(nil, model, seq(0, 12))
	if h := x.Lookup(keys[0]); len(h) != 0 {
		t.Fatalf("the oldest key survived: %v", h)
	}
	if h := x.Lookup(keys[11]); len(h) != 1 || h[0].Pod != "pod-a" {
		t.Fatalf("the newest key: %v", h)
	}
	// three pods store a key listing at most two: the first to store it goes
	x = newIndex(t, Config{BlockSize: 1, PodCacheSize: 2})
	for _, p := range []string{"pod-a", "pod-b", "pod-c"} {
		x.Apply(p, model, batch(stored([]uint64{1}, 0, false, seq(0, 1), 1, "")))
	}
	var holders []string
	for _, h := range x.Lookup(keys[0]) {
		holders = append(holders, h.Pod)
	}
	if strings.Join(holders, ",") != "pod-b,pod-c" {
		t.Fatalf("holders %v", holders)
	}
}

func TestSpeculativeEntriesCountUntilTheyExpire(t *testing.T) {
	x := newIndex(t, Config{BlockSize: 4})
	prompt := seq(0, 12)
	keys := x.Keyer().Prompt(nil, model, prompt)
	x.Apply("pod-a", model, batch(stored([]uint64{1}, 0, false, prompt[:4], 4, "CPU")))
	now := time.Unix(1000, 0).UnixNano()
	ttl := int64(2 * time.Second)
	if n := x.AddSpeculative("pod-a", keys, now, now+ttl); n != 3 {
		t.Fatalf("added %d", n)
	}
	x.AddSpeculative("pod-b", keys[:2], now, now+ttl)
	m := x.Match(keys, []string{"pod-a", "pod-b"}, now+ttl/2, nil)
	// pod-a: block 0 confirmed on CPU (0.8), blocks 1-2 speculative (GPU)
	if m[0].Blocks != 3 || !near(m[0].Score, 2.8) || m[1].Blocks != 2 {
		t.Fatalf("before expiry %+v", m)
	}
	m = x.Match(keys, []string{"pod-a", "pod-b"}, now+ttl, nil)
	if m[0].Blocks != 1 || m[1].Blocks != 0 {
		t.Fatalf("after expiry %+v", m)
	}
	// speculative entries never enter the confirmed index
	if x.Len() != 1 {
		t.Fatalf("%d confirmed keys", x.Len())
	}
	x.PurgeSpeculative(now + ttl)
	for i := range x.spec.shards {
		if len(x.spec.shards[i].refs) != 0 {
			t.Fatal("expired speculative entries kept")
		}
	}
}

func TestClearPodAndAllBlocksCleared(t *testing.T) {
	x := newIndex(t, Config{BlockSize: 4})
	prompt := seq(0, 8)
	for _, p := range []string{"pod-a", "pod-b"} {
		x.Apply(p, model, batch(stored([]uint64{1, 2}, 0, false, prompt, 4, "")))
	}
	st := x.Apply("pod-a", model, batch(events.Event{Kind: events.KindAllBlocksCleared}, stored([]uint64{3}, 1, true, seq(4, 4), 4, "")))
	if st.Cleared != 1 || st.UnknownParent != 1 {
		t.Fatalf("stats %+v", st)
	}
	keys := x.Keyer().Prompt(nil, model, prompt)
	if m := x.Match(keys, []string{"pod-a", "pod-b"}, 0, nil); m[0].Blocks != 0 || m[1].Blocks != 2 {
		t.Fatalf("match %+v", m)
	}
	x.ClearPod("pod-b")
	x.ClearPod("pod-never-seen")
	if x.Len() != 0 {
		t.Fatalf("%d keys after clearing every pod", x.Len())
	}
	// other attention kinds and unknown events are counted and ignored
	sw := stored([]uint64{9}, 0, false, seq(0, 4), 4, "")
	sw.SpecKind = "sliding_window"
	if st := x.Apply("pod-a", model, batch(sw, events.Event{Kind: events.KindUnknown, TypeName: "Future"})); st.Ignored != 2 || x.Len() != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestConfigErrorsNameTheField(t *testing.T) {
	_, err := New(Config{Size: -1, PodCacheSize: 300, BlockSize: -2})
	for _, f := range []string{"size", "podCacheSize", "blockSize"} {
		if err == nil || !strings.Contains(err.Error(), f+":") {
			t.Fatalf("err = %v, want it to name %s", err, f)
		}
	}
}

// The apply rate: BlockStored batches of 16 blocks (256 tokens), chained
// prompts over 8 pods, with removals keeping the index at a steady size.
func BenchmarkApply(b *testing.B) {
	x := newIndex(b, Config{})
	const pods, perBatch, bs = 8, 16, 16
	rng := rand.New(rand.NewPCG(1, 2))
	batches := make([]*events.Batch, 1024)
	for i := range batches {
		tokens := make([]uint32, perBatch*bs)
		for j := range tokens {
			tokens[j] = rng.Uint32() % 128000
		}
		hashes := make([]uint64, perBatch)
		for j := range hashes {
			hashes[j] = uint64(i*perBatch + j + 1)
		}
		batches[i] = batch(stored(hashes, 0, false, tokens, bs, ""))
	}
	names := make([]string, pods)
	for i := range names {
		names[i] = fmt.Sprintf("pod-%d", i)
	}
	rm := make([]*events.Batch, len(batches))
	for i, bt := range batches {
		rm[i] = batch(removed("", bt.Events[0].BlockHashes...))
	}
	b.ReportAllocs()
	b.ResetTimer()
	blocks := 0
	for i := 0; b.Loop(); i++ {
		n := i % len(batches)
		pod := names[(i/len(batches))%pods]
		x.Apply(pod, model, batches[n])
		x.Apply(pod, model, rm[(n+len(batches)/2)%len(batches)])
		blocks += perBatch
	}
	b.ReportMetric(float64(blocks)/b.Elapsed().Seconds(), "blocks/s")
}

// A Score-sized query: a 512-block prompt, 100 candidate pods, of which 10
// hold prefixes of different lengths.
func BenchmarkMatch512Blocks100Pods(b *testing.B) {
	x := newIndex(b, Config{})
	const bs = 16
	prompt := seq(0, 512*bs)
	hashes := make([]uint64, 512)
	for i := range hashes {
		hashes[i] = uint64(i + 1)
	}
	candidates := make([]string, 100)
	for i := range candidates {
		candidates[i] = fmt.Sprintf("pod-%02d", i)
		x.Apply(candidates[i], model, batch(stored(hashes[:1], 0, false, seq(900000+i*bs, bs), bs, "")))
	}
	for i := range 10 {
		n := 50 * (i + 1)
		x.Apply(candidates[i*10], model, batch(stored(hashes[:n], 0, false, prompt[:n*bs], bs, "")))
	}
	keys := x.Keyer().Prompt(nil, model, prompt)
	dst := make([]Match, 0, 100)
	var took []time.Duration
	b.ReportAllocs()
	for b.Loop() {
		start := time.Now()
		dst = x.Match(keys, candidates, 0, dst)
		took = append(took, time.Since(start))
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)*99/100].Nanoseconds())/1e3, "p99-µs")
	if dst[90].Blocks != 500 {
		b.Fatalf("pod-90 matched %d blocks", dst[90].Blocks)
	}
}

func TestMemoryBound(t *testing.T) {
	// room for 10 keys held by one pod each
	x := newIndex(t, Config{BlockSize: 1, MaxBytes: 10 * (entryBytes + holderBytes), Shards: 1})
	hashes := make([]uint64, 25)
	for i := range hashes {
		hashes[i] = uint64(i + 1)
	}
	x.Apply("pod-a", model, batch(stored(hashes, 0, false, seq(0, 25), 1, "")))
	if x.Len() != 10 || x.Evicted() != 15 || x.Bytes() > 10*(entryBytes+holderBytes) {
		t.Fatalf("%d keys, %d evicted, %d bytes", x.Len(), x.Evicted(), x.Bytes())
	}
	// the newest stay
	keys := x.Keyer().Prompt(nil, model, seq(0, 25))
	if len(x.Lookup(keys[24])) != 1 || len(x.Lookup(keys[14])) != 0 {
		t.Fatal("the bound did not push out the oldest keys")
	}
	// removals give the bytes back
	x.Apply("pod-a", model, batch(removed("", hashes[15:]...)))
	if x.Len() != 0 || x.Bytes() != 0 {
		t.Fatalf("%d keys and %d bytes after removing everything", x.Len(), x.Bytes())
	}
	if _, err := New(Config{MaxBytes: -1}); err == nil {
		t.Fatal("negative bytes accepted")
	}
}
