package valkeyindex_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/valkey-io/valkey-go"
	"go.uber.org/goleak"

	"github.com/hermod/hermod/libs/kv/blockkey"
	"github.com/hermod/hermod/libs/kv/events"
	"github.com/hermod/hermod/libs/kv/index"
	"github.com/hermod/hermod/libs/kv/valkeyindex"
	"github.com/hermod/hermod/testkit/redistest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	model = "m"
	bs    = 4
)

func client(t testing.TB, srv *redistest.Server) valkey.Client { return srv.Client(t) }

func open(t testing.TB, c valkey.Client) *valkeyindex.Index {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	x, _, err := valkeyindex.New(ctx, c, valkeyindex.Config{Pool: "p", BlockSize: bs})
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// message is a stream message for both indexes.
type message struct {
	pod   string
	clear bool
	batch *events.Batch
}

// randomStream makes batches of stores (from the root or a held block,
// on GPU or CPU, some reusing a hash for other tokens), removals, clears
// and blocks with unknown parents, over three pods sharing documents.
func randomStream(rng *rand.Rand, n int) []message {
	pods := []string{"pod-a", "pod-b", "pod-c"}
	held := map[string][]uint64{}
	next := uint64(1000)
	var out []message
	for range n {
		pod := pods[rng.IntN(len(pods))]
		hs := held[pod]
		var ev events.Event
		switch r := rng.IntN(20); {
		case r < 11:
			nb := 1 + rng.IntN(3)
			ev = events.Event{Kind: events.KindBlockStored, Medium: "GPU", BlockSize: bs}
			if rng.IntN(5) == 0 {
				ev.Medium = "CPU"
			}
			if len(hs) > 0 && rng.IntN(2) == 0 {
				ev.HasParent, ev.ParentHash = true, hs[rng.IntN(len(hs))]
			}
			doc := rng.IntN(3)
			for i := range nb {
				if len(hs) > 0 && rng.IntN(8) == 0 {
					ev.BlockHashes = append(ev.BlockHashes, hs[rng.IntN(len(hs))]) // reused or repeated
				} else {
					next++
					ev.BlockHashes = append(ev.BlockHashes, next)
					hs = append(hs, next)
				}
				for j := range bs {
					ev.TokenIDs = append(ev.TokenIDs, uint32(doc*1000+rng.IntN(2)*100+i*bs+j))
				}
			}
		case r < 16:
			ev = events.Event{Kind: events.KindBlockRemoved, Medium: "GPU"}
			if rng.IntN(4) == 0 {
				ev.Medium = "CPU"
			}
			for _, h := range hs {
				if rng.IntN(3) == 0 {
					ev.BlockHashes = append(ev.BlockHashes, h)
				}
			}
		case r < 17:
			ev = events.Event{Kind: events.KindAllBlocksCleared}
			hs = nil
		case r < 18:
			out = append(out, message{pod: pod, clear: true})
			held[pod] = nil
			continue
		default:
			ev = events.Event{Kind: events.KindBlockStored, HasParent: true, ParentHash: 7, BlockHashes: []uint64{8}, TokenIDs: make([]uint32, bs)}
		}
		held[pod] = hs
		out = append(out, message{pod: pod, batch: &events.Batch{Events: []events.Event{ev}}})
	}
	return out
}

func applyMemory(t testing.TB, msgs []message) *index.Index {
	mem, err := index.New(index.Config{BlockSize: bs, Size: 1 << 20, PodCacheSize: 255, Shards: 4})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		if m.clear {
			mem.ClearPod(m.pod)
		}
		if m.batch != nil {
			mem.Apply(m.pod, model, m.batch)
		}
	}
	return mem
}

func offer(ctx context.Context, x *valkeyindex.Index, msgs []message, from int) (applied int, err error) {
	for i := from; i < len(msgs); i++ {
		m := msgs[i]
		ok, _, err := x.Apply(ctx, valkeyindex.Batch{StreamSeq: uint64(i + 1), Pod: m.pod, Model: model, EngineSeq: uint64(i), ClearPod: m.clear, Events: m.batch})
		if err != nil {
			return applied, err
		}
		if ok {
			applied++
		}
	}
	return applied, nil
}

// prompts are token sequences over the stream's documents.
func prompts(rng *rand.Rand, k *blockkey.Keyer) [][]blockkey.Key {
	var out [][]blockkey.Key
	for range 30 {
		doc := rng.IntN(3)
		toks := make([]uint32, bs*(1+rng.IntN(4)))
		for i := range toks {
			toks[i] = uint32(doc*1000 + rng.IntN(2)*100 + i)
		}
		out = append(out, k.Prompt(nil, model, toks))
	}
	return out
}

func TestSharedIndexEqualsTheInMemoryProjection(t *testing.T) {
	srv := redistest.Start(t)
	c := client(t, srv)
	ctx := context.Background()
	candidates := []string{"pod-c", "pod-a", "nobody", "pod-b", "pod-a"}
	for seed := uint64(1); seed <= 6; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			if err := c.Do(ctx, c.B().Flushall().Build()).Error(); err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(seed, 5))
			msgs := randomStream(rng, 300)
			mem := applyMemory(t, msgs)
			x := open(t, c)
			if _, err := offer(ctx, x, msgs, 0); err != nil {
				t.Fatal(err)
			}
			got, err := x.Digest(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if want := mem.Digest(); got != want {
				t.Fatalf("digest %x, in-memory %x", got, want)
			}
			n, _ := x.Len(ctx)
			if n != mem.Len() {
				t.Fatalf("%d keys, in-memory %d", n, mem.Len())
			}
			for _, keys := range prompts(rng, x.Keyer()) {
				want := mem.Match(keys, candidates, 0, nil)
				got, err := x.Match(ctx, keys, candidates, nil, 0)
				if err != nil {
					t.Fatal(err)
				}
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("match %v, in-memory %v", got, want)
				}
				for _, k := range keys {
					h, err := x.Lookup(ctx, k)
					if err != nil {
						t.Fatal(err)
					}
					if len(h) != len(mem.Lookup(k)) {
						t.Fatalf("lookup %v, in-memory %v", h, mem.Lookup(k))
					}
				}
			}
		})
	}
}

func TestReplicasApplyEachBatchOnce(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	msgs := randomStream(rand.New(rand.NewPCG(9, 9)), 400)
	mem := applyMemory(t, msgs)
	// three replicas, each with its own connection, offer the whole
	// stream at once; one starts late (it reads the cursor and skips)
	var xs []*valkeyindex.Index
	for range 2 {
		xs = append(xs, open(t, client(t, srv)))
	}
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 3)
	for _, x := range xs {
		go func() { n, err := offer(ctx, x, msgs, 0); done <- result{n, err} }()
	}
	late := open(t, client(t, srv))
	go func() { n, err := offer(ctx, late, msgs, int(late.Cursor())); done <- result{n, err} }()
	total := 0
	for range 3 {
		r := <-done
		if r.err != nil {
			t.Fatal(r.err)
		}
		total += r.n
	}
	if total != len(msgs) {
		t.Fatalf("%d batches applied by the replicas together, want each of the %d once", total, len(msgs))
	}
	got, err := xs[0].Digest(ctx)
	if err != nil || got != mem.Digest() {
		t.Fatalf("digest %x (%v), in-memory %x", got, err, mem.Digest())
	}
	seqs, err := late.PodSeqs(ctx)
	if err != nil || len(seqs) != 3 {
		t.Fatalf("pod sequences %v, %v", seqs, err)
	}
}

func TestALostIndexIsRebuiltFromTheStream(t *testing.T) {
	srv := redistest.Start(t)
	c := client(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	msgs := randomStream(rand.New(rand.NewPCG(3, 3)), 200)
	x := open(t, c)
	if _, err := offer(ctx, x, msgs[:100], 0); err != nil {
		t.Fatal(err)
	}
	// the server restarts empty: the next batch finds another index
	srv.Stop()
	down, cancelDown := context.WithTimeout(ctx, 500*time.Millisecond)
	_, err := offer(down, x, msgs, 100)
	cancelDown()
	if err == nil {
		t.Fatal("no error with the server down")
	}
	srv.Restart()
	for range 50 { // the client reconnects
		if _, err = offer(ctx, x, msgs, 100); !errors.Is(err, valkeyindex.ErrLost) {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		break
	}
	if !errors.Is(err, valkeyindex.ErrLost) {
		t.Fatalf("after the restart: %v, want ErrLost", err)
	}
	from, err := x.Reset(ctx)
	if err != nil || from != 0 {
		t.Fatalf("reset: cursor %d, %v", from, err)
	}
	if _, err := offer(ctx, x, msgs, int(from)); err != nil {
		t.Fatal(err)
	}
	got, err := x.Digest(ctx)
	if want := applyMemory(t, msgs).Digest(); err != nil || got != want {
		t.Fatalf("rebuilt digest %x (%v), want %x", got, err, want)
	}
}

func TestSpeculativeEntriesCarryTheRunOn(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	x := open(t, client(t, srv))
	toks := make([]uint32, 4*bs)
	for i := range toks {
		toks[i] = uint32(i)
	}
	// pod-a holds the first two blocks; speculation says it will hold all four
	ev := events.Event{Kind: events.KindBlockStored, BlockSize: bs, BlockHashes: []uint64{1, 2}, TokenIDs: toks[:2*bs]}
	if _, _, err := x.Apply(ctx, valkeyindex.Batch{StreamSeq: 1, Pod: "pod-a", Model: model, Events: &events.Batch{Events: []events.Event{ev}}}); err != nil {
		t.Fatal(err)
	}
	keys := x.Keyer().Prompt(nil, model, toks)
	spec, err := index.New(index.Config{BlockSize: bs})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UnixNano()
	spec.AddSpeculative("pod-a", keys, now, now+int64(time.Second))
	spec.AddSpeculative("pod-b", keys[:1], now, now+int64(time.Second))
	got, err := x.Match(ctx, keys, []string{"pod-a", "pod-b"}, spec, now)
	if err != nil {
		t.Fatal(err)
	}
	if got[0].Blocks != 4 || got[1].Blocks != 1 {
		t.Fatalf("matches %+v, want 4 blocks for pod-a, 1 for pod-b", got)
	}
	if got, _ := x.Match(ctx, keys, []string{"pod-a", "pod-b"}, spec, now+int64(2*time.Second)); got[0].Blocks != 2 || got[1].Blocks != 0 {
		t.Fatalf("after expiry %+v, want 2 and 0", got)
	}
}

// BenchmarkMatch512Blocks100Pods: a 512-block prompt against 100
// candidates, ten of which hold runs of it, over loopback to a real
// server (the Lua walk and the reply).
func BenchmarkMatch512Blocks100Pods(b *testing.B) {
	srv := redistest.Start(b)
	ctx := context.Background()
	x := open(b, client(b, srv))
	const blocks = 512
	toks := make([]uint32, blocks*bs)
	for i := range toks {
		toks[i] = uint32(i)
	}
	var pods []string
	for p := range 100 {
		pods = append(pods, fmt.Sprintf("pod-%02d", p))
	}
	for p := range 10 {
		n := blocks * (p + 1) / 10
		hashes := make([]uint64, n)
		for i := range hashes {
			hashes[i] = uint64(i + 1)
		}
		ev := events.Event{Kind: events.KindBlockStored, BlockSize: bs, BlockHashes: hashes, TokenIDs: toks[:n*bs]}
		if _, _, err := x.Apply(ctx, valkeyindex.Batch{StreamSeq: uint64(p + 1), Pod: pods[p*10], Model: model, Events: &events.Batch{Events: []events.Event{ev}}}); err != nil {
			b.Fatal(err)
		}
	}
	keys := x.Keyer().Prompt(nil, model, toks)
	b.ResetTimer()
	for b.Loop() {
		m, err := x.Match(ctx, keys, pods, nil, 0)
		if err != nil || m[90].Blocks != blocks {
			b.Fatalf("%v %v", m[90], err)
		}
	}
}
