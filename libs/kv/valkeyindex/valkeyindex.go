// Package valkeyindex keeps a pool's block index in Valkey or Redis,
// shared by every indexer replica of the pool instead of one copy in each.
//
// The index stays a projection of the pool's KV stream: each replica
// consumes the stream in order and offers every batch; a script applies a
// batch only if the index's cursor (the stream sequence of the last batch
// applied) is behind it, so each batch is applied once, in order, however
// many replicas offer it and whichever of them comes and goes.
//
// Layout under the prefix "hermod:kv:{<pool>}:" (the braces keep a pool's
// keys in one cluster slot):
//
//	b:<key, 8 bytes LE>  hash: <tier byte><pod> -> how many of the pod's engine blocks hold the key on that tier
//	e:<pod>              hash: <engine hash, 8 bytes LE> -> tiers byte, then the block's keys (8 bytes LE each, in order)
//	cursor               the stream sequence of the last batch applied
//	epoch                a random id of this copy of the index: a replica that finds another (the server lost its data) rebuilds it
//	seqs                 hash: pod -> the engine sequence of its last batch applied
//	pods                 set: the pods the index has seen
//
// Unlike the in-memory index it has no key or pod bounds: size the server
// for the fleet's blocks (about 100 bytes per key and holder) and run it
// without eviction (maxmemory-policy noeviction), since an evicted engine
// block would leave its keys behind.
package valkeyindex

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/valkey-io/valkey-go"

	"github.com/hermod/hermod/libs/kv/blockkey"
	"github.com/hermod/hermod/libs/kv/index"
)

// ErrLost means the server no longer holds the index this replica was
// applying to (it restarted empty, or was flushed): call Reset and offer
// the stream again from the sequence it returns.
var ErrLost = errors.New("valkey index: the server lost the index (rebuilding from the stream)")

// Config configures a pool's shared index.
type Config struct {
	// Pool names the pool (the keys' prefix).
	Pool string
	// BlockSize and Seed key the blocks as the pickers do (defaults 16, 0).
	BlockSize int
	Seed      uint64
	// Weights score matched blocks by tier (default index.DefaultWeights).
	Weights *index.Weights
}

// Index is a pool's block index on a Valkey or Redis server. It is safe
// for concurrent use; Apply must be called in stream order.
type Index struct {
	c      valkey.Client
	keyer  *blockkey.Keyer
	w      index.Weights
	prefix string
	keys   struct{ cursor, epoch, seqs, pods string }

	mu     sync.Mutex
	epoch  string
	cursor atomic.Uint64 // the highest stream sequence known applied
}

// New returns the pool's index on the client's server and reads where it
// stands (see Reset).
func New(ctx context.Context, c valkey.Client, cfg Config) (*Index, uint64, error) {
	if cfg.BlockSize == 0 {
		cfg.BlockSize = blockkey.DefaultBlockSize
	}
	keyer, err := blockkey.New(cfg.BlockSize, cfg.Seed)
	if err != nil {
		return nil, 0, fmt.Errorf("valkey index: %w", err)
	}
	x := &Index{c: c, keyer: keyer, w: index.DefaultWeights, prefix: "hermod:kv:{" + cfg.Pool + "}:"}
	if cfg.Weights != nil {
		x.w = *cfg.Weights
	}
	x.keys.cursor, x.keys.epoch, x.keys.seqs, x.keys.pods = x.prefix+"cursor", x.prefix+"epoch", x.prefix+"seqs", x.prefix+"pods"
	cursor, err := x.Reset(ctx)
	if err != nil {
		return nil, 0, err
	}
	return x, cursor, nil
}

// Keyer returns the index's block keyer (prompts must be keyed with it).
func (x *Index) Keyer() *blockkey.Keyer { return x.keyer }

// Reset adopts the index the server holds (creating an empty one if it
// holds none) and returns its cursor: offer the stream from the next
// sequence.
func (x *Index) Reset(ctx context.Context) (uint64, error) {
	var id [8]byte
	_, _ = rand.Read(id[:])
	c := x.c
	res := c.DoMulti(ctx,
		c.B().Set().Key(x.keys.epoch).Value(hex.EncodeToString(id[:])).Nx().Build(),
		c.B().Get().Key(x.keys.epoch).Build(),
		c.B().Get().Key(x.keys.cursor).Build())
	if err := res[0].Error(); err != nil && !valkey.IsValkeyNil(err) {
		return 0, fmt.Errorf("valkey index: %w", err)
	}
	epoch, err := res[1].ToString()
	if err != nil {
		return 0, fmt.Errorf("valkey index: epoch: %w", err)
	}
	var cursor uint64
	if s, err := res[2].ToString(); err == nil {
		if cursor, err = strconv.ParseUint(s, 10, 64); err != nil {
			return 0, fmt.Errorf("valkey index: cursor %q: %w", s, err)
		}
	} else if !valkey.IsValkeyNil(err) {
		return 0, fmt.Errorf("valkey index: cursor: %w", err)
	}
	x.mu.Lock()
	x.epoch = epoch
	x.mu.Unlock()
	x.cursor.Store(cursor)
	return cursor, nil
}

// Cursor is the highest stream sequence this replica knows applied.
func (x *Index) Cursor() uint64 { return x.cursor.Load() }

func (x *Index) blockKey(k blockkey.Key) string {
	b := make([]byte, 0, len(x.prefix)+10)
	b = append(b, x.prefix...)
	b = append(b, 'b', ':')
	return string(binary.LittleEndian.AppendUint64(b, uint64(k)))
}

func (x *Index) enginesKey(pod string) string { return x.prefix + "e:" + pod }

func holderField(t index.Tier, pod string) string { return string(rune(t)) + pod }

func hashField(h uint64) string { return string(binary.LittleEndian.AppendUint64(nil, h)) }

// PodSeqs returns each pod's last engine sequence applied.
func (x *Index) PodSeqs(ctx context.Context) (map[string]uint64, error) {
	m, err := x.c.Do(ctx, x.c.B().Hgetall().Key(x.keys.seqs).Build()).AsStrMap()
	if err != nil {
		return nil, fmt.Errorf("valkey index: pod sequences: %w", err)
	}
	out := make(map[string]uint64, len(m))
	for pod, s := range m {
		if n, err := strconv.ParseUint(s, 10, 64); err == nil {
			out[pod] = n
		}
	}
	return out, nil
}

// Lookup returns the pods holding key, by name.
func (x *Index) Lookup(ctx context.Context, k blockkey.Key) ([]index.Holder, error) {
	m, err := x.c.Do(ctx, x.c.B().Hgetall().Key(x.blockKey(k)).Build()).AsStrMap()
	if err != nil {
		return nil, fmt.Errorf("valkey index: lookup: %w", err)
	}
	tiers := map[string][]index.Tier{}
	for f, n := range m {
		if len(f) < 2 || n == "0" {
			continue
		}
		tiers[f[1:]] = append(tiers[f[1:]], index.Tier(f[0]))
	}
	out := make([]index.Holder, 0, len(tiers))
	for pod, ts := range tiers {
		sort.Slice(ts, func(i, j int) bool { return ts[i] < ts[j] })
		out = append(out, index.Holder{Pod: pod, Tiers: ts})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Pod < out[j].Pod })
	return out, nil
}
