// Package index is the KV-block index: which pods hold which blocks, on
// which tier, built from the engines' KV-cache events and queried with the
// block keys of a prompt (spec/vllm-wire.md §1-2, the precise prefix
// scorer of spec/scheduling.md).
//
// The confirmed index is a pure function of the events applied, in order:
// every replica that applies the same event log holds the same index, so
// it can be rebuilt by replaying the log. Speculative entries (added right
// after a routing decision, before the engine's event arrives) live apart
// and expire; they never change what the log built.
package index

import (
	"errors"
	"fmt"
	"sync"

	"github.com/hermod/hermod/libs/kv/blockkey"
)

// Tier is a storage tier of the KV cache.
type Tier uint8

// Tiers. vLLM reports the medium of a block; absent means GPU.
const (
	TierGPU Tier = iota
	TierCPU
	TierOther // disk, remote and tiers this package does not know
	numTiers
)

// TierOf maps an event's medium to a tier.
func TierOf(medium string) Tier {
	switch medium {
	case "", "GPU", "gpu", "cuda", "CUDA":
		return TierGPU
	case "CPU", "cpu":
		return TierCPU
	}
	return TierOther
}

// String returns the tier's name.
func (t Tier) String() string {
	switch t {
	case TierGPU:
		return "GPU"
	case TierCPU:
		return "CPU"
	}
	return "other"
}

// tierSet is a set of tiers (bit t = tier t).
type tierSet uint8

func (s tierSet) has(t Tier) bool { return s&(1<<t) != 0 }

// best returns the fastest tier of a non-empty set.
func (s tierSet) best() Tier {
	for t := TierGPU; t < numTiers; t++ {
		if s.has(t) {
			return t
		}
	}
	return TierOther
}

// Weights are the score weights of a matched block by its best tier.
type Weights [numTiers]float64

// DefaultWeights weigh a GPU block 1.0 and an offloaded one 0.8.
var DefaultWeights = Weights{TierGPU: 1.0, TierCPU: 0.8, TierOther: 0.8}

// Config bounds the in-memory index (reference/001's inMemoryConfig).
type Config struct {
	// Size is the most keys the index holds (default 1e8); the least
	// recently stored go first.
	Size int
	// PodCacheSize is the most pods a key lists (default 10); the pod that
	// stored it least recently goes first.
	PodCacheSize int
	// MaxBytes, when positive, also bounds the index's estimated memory
	// (reference/001's costAwareMemoryConfig.size): the least recently
	// stored keys go first.
	MaxBytes int64
	// BlockSize is the index's tokens per block (default 16).
	BlockSize int
	// Seed seeds the block keys.
	Seed uint64
	// Shards splits the index for concurrency (default 64, rounded up to a
	// power of two).
	Shards int
	// Weights score matched blocks by tier (default DefaultWeights).
	Weights *Weights
}

// Defaults of reference/001's inMemoryConfig.
const (
	DefaultSize         = 100_000_000
	DefaultPodCacheSize = 10
	DefaultShards       = 64
)

func (c *Config) defaults() error {
	if c.Size == 0 {
		c.Size = DefaultSize
	}
	if c.PodCacheSize == 0 {
		c.PodCacheSize = DefaultPodCacheSize
	}
	if c.BlockSize == 0 {
		c.BlockSize = blockkey.DefaultBlockSize
	}
	if c.Shards == 0 {
		c.Shards = DefaultShards
	}
	if c.Weights == nil {
		w := DefaultWeights
		c.Weights = &w
	}
	var errs []error
	if c.Size < 1 {
		errs = append(errs, fmt.Errorf("size: must be positive (got %d)", c.Size))
	}
	if c.PodCacheSize < 1 || c.PodCacheSize > 255 {
		errs = append(errs, fmt.Errorf("podCacheSize: must be between 1 and 255 (got %d)", c.PodCacheSize))
	}
	if c.BlockSize < 1 {
		errs = append(errs, fmt.Errorf("blockSize: must be positive (got %d)", c.BlockSize))
	}
	if c.Shards < 1 {
		errs = append(errs, fmt.Errorf("shards: must be positive (got %d)", c.Shards))
	}
	if c.MaxBytes < 0 {
		errs = append(errs, fmt.Errorf("size (bytes): must not be negative (got %d)", c.MaxBytes))
	}
	n := 1
	for n < c.Shards {
		n <<= 1
	}
	c.Shards = n
	return errors.Join(errs...)
}

// Index is the in-memory block index. It is safe for concurrent use: one
// writer applying events and any number of readers matching prompts.
type Index struct {
	cfg    Config
	keyer  *blockkey.Keyer
	shards []shard
	mask   uint64
	spec   speculative

	podsMu   sync.RWMutex
	pods     map[string]*pod
	podNames []string // by pod id
}

// New builds an empty index.
func New(cfg Config) (*Index, error) {
	if err := cfg.defaults(); err != nil {
		return nil, fmt.Errorf("index: %w", err)
	}
	keyer, err := blockkey.New(cfg.BlockSize, cfg.Seed)
	if err != nil {
		return nil, fmt.Errorf("index: %w", err)
	}
	x := &Index{cfg: cfg, keyer: keyer, shards: make([]shard, cfg.Shards), mask: uint64(cfg.Shards - 1), pods: map[string]*pod{}}
	perShard := max(1, (cfg.Size+cfg.Shards-1)/cfg.Shards)
	var perShardBytes int64
	if cfg.MaxBytes > 0 {
		perShardBytes = max(1, cfg.MaxBytes/int64(cfg.Shards))
	}
	for i := range x.shards {
		x.shards[i].init(perShard, cfg.PodCacheSize, perShardBytes)
	}
	x.spec.init(cfg.Shards)
	return x, nil
}

// Keyer returns the index's block keyer (prompts must be keyed with it).
func (x *Index) Keyer() *blockkey.Keyer { return x.keyer }

func (x *Index) shardOf(k blockkey.Key) *shard {
	// keys are hashes already; mix the high bits in so that a power-of-two
	// mask sees all of them
	h := uint64(k)
	return &x.shards[(h^h>>32)&x.mask]
}

// podID returns the pod's id, registering it if create.
func (x *Index) pod(name string, create bool) *pod {
	x.podsMu.RLock()
	p := x.pods[name]
	x.podsMu.RUnlock()
	if p != nil || !create {
		return p
	}
	x.podsMu.Lock()
	defer x.podsMu.Unlock()
	if p = x.pods[name]; p == nil {
		p = &pod{id: uint32(len(x.podNames)), name: name, blocks: map[uint64]podBlock{}}
		x.pods[name] = p
		x.podNames = append(x.podNames, name)
	}
	return p
}

// Len returns the number of keys in the index.
func (x *Index) Len() int {
	return sumShards(x, func(s *shard) int { return len(s.slots) })
}

// Holder is a pod holding a key, and the tiers it holds it on.
type Holder struct {
	Pod   string
	Tiers []Tier
}

// Lookup returns the pods holding key (confirmed by events), the one that
// stored it least recently first.
func (x *Index) Lookup(k blockkey.Key) []Holder {
	s := x.shardOf(k)
	s.mu.RLock()
	refs := append([]podRef(nil), s.holders(k)...)
	s.mu.RUnlock()
	x.podsMu.RLock()
	defer x.podsMu.RUnlock()
	out := make([]Holder, 0, len(refs))
	for _, r := range refs {
		h := Holder{Pod: x.podNames[r.pod]}
		ts := r.tiers()
		for t := TierGPU; t < numTiers; t++ {
			if ts.has(t) {
				h.Tiers = append(h.Tiers, t)
			}
		}
		out = append(out, h)
	}
	return out
}

// Bytes returns the index's estimated memory (the cost-aware bound's
// measure).
func (x *Index) Bytes() int64 {
	return sumShards(x, func(s *shard) int64 { return s.bytes })
}

// Evicted returns how many keys the size bounds have pushed out.
func (x *Index) Evicted() uint64 {
	return sumShards(x, func(s *shard) uint64 { return s.evicted })
}

// sumShards adds up what f reads of each shard, under the shard's read
// lock.
func sumShards[T int | int64 | uint64](x *Index, f func(*shard) T) T {
	var n T
	for i := range x.shards {
		s := &x.shards[i]
		s.mu.RLock()
		n += f(s)
		s.mu.RUnlock()
	}
	return n
}
