package index

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/hermod/hermod/libs/kv/blockkey"
	"github.com/hermod/hermod/libs/kv/events"
)

const model = "meta-llama/Llama-3.1-8B-Instruct"

func newIndex(t testing.TB, cfg Config) *Index {
	t.Helper()
	x, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func stored(hashes []uint64, parent uint64, hasParent bool, tokens []uint32, blockSize int, medium string) events.Event {
	return events.Event{Kind: events.KindBlockStored, BlockHashes: hashes, ParentHash: parent, HasParent: hasParent, TokenIDs: tokens, BlockSize: blockSize, Medium: medium}
}

func removed(medium string, hashes ...uint64) events.Event {
	return events.Event{Kind: events.KindBlockRemoved, BlockHashes: hashes, Medium: medium}
}

func batch(evs ...events.Event) *events.Batch { return &events.Batch{Events: evs} }

func seq(from, n int) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = uint32(from + i)
	}
	return out
}

// modelIndex is the specification the index is checked against: for every
// pod, its engine blocks with their keys and tiers; a key is held by a pod
// on a tier when one of its blocks with that key is on that tier.
type modelIndex struct {
	pods map[string]map[uint64]modelBlock
}

type modelBlock struct {
	keys  []blockkey.Key
	tiers map[Tier]bool
	// how it was stored, to offload it to another tier
	parent    uint64
	hasParent bool
	tokens    []uint32
}

func (m *modelIndex) holders() map[blockkey.Key]map[string]map[Tier]bool {
	out := map[blockkey.Key]map[string]map[Tier]bool{}
	for pod, blocks := range m.pods {
		for _, b := range blocks {
			for _, k := range b.keys {
				for t := range b.tiers {
					if out[k] == nil {
						out[k] = map[string]map[Tier]bool{}
					}
					if out[k][pod] == nil {
						out[k][pod] = map[Tier]bool{}
					}
					out[k][pod][t] = true
				}
			}
		}
	}
	return out
}

// Random Stored/Removed/Cleared sequences over pods sharing prefixes
// leave the index equal to the model: the same keys, each held by the
// same pods on the same tiers.
func TestIndexEqualsModelUnderRandomEvents(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 99))
			const bs = 4
			x := newIndex(t, Config{BlockSize: bs, Size: 1 << 20, PodCacheSize: 16, Shards: 4})
			k := x.Keyer()
			m := &modelIndex{pods: map[string]map[uint64]modelBlock{}}
			pods := []string{"pod-a", "pod-b", "pod-c"}
			nextHash := uint64(1000)
			for step := 0; step < 400; step++ {
				pod := pods[rng.IntN(len(pods))]
				blocks := m.pods[pod]
				if blocks == nil {
					blocks = map[uint64]modelBlock{}
					m.pods[pod] = blocks
				}
				switch r := rng.IntN(20); {
				case r < 11: // store 1-3 blocks from the root or from a held block
					n := 1 + rng.IntN(3)
					// tokens from a few "documents" so that pods share keys
					doc := rng.IntN(3)
					parentKey, hasParent, parentHash := k.Root(model), false, uint64(0)
					if len(blocks) > 0 && rng.IntN(2) == 0 {
						hs := sortedHashes(blocks)
						parentHash = hs[rng.IntN(len(hs))]
						hasParent = true
						parentKey = blocks[parentHash].keys[0]
					}
					tokens := make([]uint32, 0, n*bs)
					for i := range n * bs {
						tokens = append(tokens, uint32(doc*1000+rng.IntN(2)*100+i%bs))
					}
					medium := "GPU"
					if rng.IntN(5) == 0 {
						medium = "CPU"
					}
					hashes := make([]uint64, n)
					key := parentKey
					for i := range hashes {
						nextHash++
						hashes[i] = nextHash
						key = k.Next(key, tokens[i*bs:(i+1)*bs], nil)
						b := blocks[hashes[i]]
						if b.tiers == nil {
							b = modelBlock{keys: []blockkey.Key{key}, tiers: map[Tier]bool{}, tokens: tokens[i*bs : (i+1)*bs]}
							b.parent, b.hasParent = parentHash, hasParent
							if i > 0 {
								b.parent, b.hasParent = hashes[i-1], true
							}
						}
						b.tiers[TierOf(medium)] = true
						blocks[hashes[i]] = b
					}
					x.Apply(pod, model, batch(stored(hashes, parentHash, hasParent, tokens, bs, medium)))
				case r < 13: // offload a held block to the other tier (same hash)
					hs := sortedHashes(blocks)
					if len(hs) == 0 {
						continue
					}
					h := hs[rng.IntN(len(hs))]
					b := blocks[h]
					if b.hasParent {
						if _, ok := blocks[b.parent]; !ok {
							continue // its parent is gone: the index would drop it
						}
					}
					medium := "CPU"
					if b.tiers[TierCPU] {
						medium = "GPU"
					}
					b.tiers[TierOf(medium)] = true
					x.Apply(pod, model, batch(stored([]uint64{h}, b.parent, b.hasParent, b.tokens, bs, medium)))
				case r < 17: // remove some blocks from one tier
					hs := sortedHashes(blocks)
					if len(hs) == 0 {
						continue
					}
					var victims []uint64
					tier := TierGPU
					if rng.IntN(4) == 0 {
						tier = TierCPU
					}
					for _, h := range hs {
						if rng.IntN(3) == 0 {
							victims = append(victims, h)
							if b := blocks[h]; b.tiers[tier] {
								delete(b.tiers, tier)
								if len(b.tiers) == 0 {
									delete(blocks, h)
								}
							}
						}
					}
					x.Apply(pod, model, batch(removed(tier.String(), victims...)))
				case r < 18:
					x.Apply(pod, model, batch(events.Event{Kind: events.KindAllBlocksCleared}))
					clear(blocks)
				default: // a block whose parent the pod never stored: dropped
					st := x.Apply(pod, model, batch(stored([]uint64{1}, 77, true, seq(0, bs), bs, "")))
					if st.UnknownParent != 1 || st.Stored != 0 {
						t.Fatalf("unknown parent: %+v", st)
					}
				}
			}
			want := m.holders()
			if x.Len() != len(want) {
				t.Fatalf("index has %d keys, model %d", x.Len(), len(want))
			}
			var bytes int64
			for _, pods := range want {
				bytes += entryBytes + holderBytes*int64(len(pods))
			}
			if x.Bytes() != bytes {
				t.Fatalf("index estimates %d bytes, its keys and holders make %d", x.Bytes(), bytes)
			}
			for key, pods := range want {
				got := map[string]map[Tier]bool{}
				for _, h := range x.Lookup(key) {
					got[h.Pod] = map[Tier]bool{}
					for _, t := range h.Tiers {
						got[h.Pod][t] = true
					}
				}
				if fmt.Sprint(got) != fmt.Sprint(pods) {
					t.Fatalf("key %x: index %v, model %v", key, got, pods)
				}
			}
		})
	}
}

func sortedHashes(m map[uint64]modelBlock) []uint64 {
	hs := make([]uint64, 0, len(m))
	for h := range m {
		hs = append(hs, h)
	}
	slices.Sort(hs)
	return hs
}

func TestDigestFollowsContentNotLayout(t *testing.T) {
	a := newIndex(t, Config{BlockSize: 4, Shards: 1})
	b := newIndex(t, Config{BlockSize: 4, Shards: 16})
	evA := batch(stored([]uint64{1, 2}, 0, false, seq(0, 8), 4, ""))
	evB := batch(stored([]uint64{5}, 0, false, seq(100, 4), 4, "CPU"))
	// the same events, pods first seen in another order
	a.Apply("pod-a", model, evA)
	a.Apply("pod-b", model, evB)
	b.Apply("pod-b", model, evB)
	b.Apply("pod-a", model, evA)
	if a.Digest() != b.Digest() {
		t.Fatal("same content, different digests")
	}
	b.Apply("pod-a", model, batch(removed("", 2)))
	if a.Digest() == b.Digest() {
		t.Fatal("different content, same digest")
	}
	if empty := newIndex(t, Config{}); empty.Digest() != 0 {
		t.Fatal("an empty index has a digest")
	}
}
