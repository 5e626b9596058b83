package valkeyindex

import (
	"context"
	"encoding/binary"
	"fmt"
	"strconv"

	"github.com/valkey-io/valkey-go"

	"github.com/hermod/hermod/libs/kv/blockkey"
	"github.com/hermod/hermod/libs/kv/events"
	"github.com/hermod/hermod/libs/kv/index"
)

// applyScript applies one batch's changes unless the index is past it.
// KEYS: cursor, epoch, seqs, pods. ARGV: stream sequence, epoch, pod,
// engine sequence, then (op, key, field, value) quadruples: i increments
// a holder, d decrements it (dropping it at zero), s sets an engine
// block, x deletes one, c deletes a key. It returns {1, cursor} when it
// applied the batch, {0, cursor} when the index was past it, and {-1, 0}
// when the epoch is not the caller's (the index was lost).
var applyScript = valkey.NewLuaScript(`
if redis.call('GET', KEYS[2]) ~= ARGV[2] then return {-1, 0} end
local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
local seq = tonumber(ARGV[1])
if cur >= seq then return {0, cur} end
for i = 5, #ARGV, 4 do
  local op, k, f = ARGV[i], ARGV[i+1], ARGV[i+2]
  if op == 'i' then
    redis.call('HINCRBY', k, f, 1)
  elseif op == 'd' then
    if redis.call('HINCRBY', k, f, -1) <= 0 then redis.call('HDEL', k, f) end
  elseif op == 's' then
    redis.call('HSET', k, f, ARGV[i+3])
  elseif op == 'x' then
    redis.call('HDEL', k, f)
  elseif op == 'c' then
    redis.call('DEL', k)
  end
end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('HSET', KEYS[3], ARGV[3], ARGV[4])
redis.call('SADD', KEYS[4], ARGV[3])
return {1, seq}
`)

// Batch is one message of the pool's KV stream.
type Batch struct {
	// StreamSeq is the message's stream sequence.
	StreamSeq uint64
	Pod       string
	// Model is the pod's model: the chain root of blocks without an
	// adapter.
	Model string
	// EngineSeq is the engine's sequence number of the batch.
	EngineSeq uint64
	// ClearPod drops the pod's blocks before the events (a restart, or
	// history lost and being rebuilt).
	ClearPod bool
	// Events are the batch's events (nil when it carried none, or they
	// did not decode).
	Events *events.Batch
}

// engineBlock is a pod's engine block: its keys (the last one chains the
// next block) and the tiers it is on.
type engineBlock struct {
	keys  []blockkey.Key
	tiers uint8
}

func (b engineBlock) last() blockkey.Key { return b.keys[len(b.keys)-1] }

func (b engineBlock) encode() string {
	out := make([]byte, 1, 1+8*len(b.keys))
	out[0] = b.tiers
	for _, k := range b.keys {
		out = binary.LittleEndian.AppendUint64(out, uint64(k))
	}
	return string(out)
}

func decodeEngineBlock(s string) (engineBlock, bool) {
	if len(s) < 9 || (len(s)-1)%8 != 0 {
		return engineBlock{}, false
	}
	b := engineBlock{tiers: s[0], keys: make([]blockkey.Key, (len(s)-1)/8)}
	for i := range b.keys {
		b.keys[i] = blockkey.Key(binary.LittleEndian.Uint64([]byte(s[1+8*i : 9+8*i])))
	}
	return b, true
}

// plan is a batch's changes, computed from the pod's engine blocks
// before the batch: the script applies them if nobody applied the batch
// first.
type plan struct {
	x      *Index
	pod    string
	engKey string
	blocks map[uint64]engineBlock // the pod's engine blocks as the batch goes
	ops    []string
	st     index.Stats
}

func (p *plan) op(op, key, field, value string) { p.ops = append(p.ops, op, key, field, value) }

func (p *plan) holders(b engineBlock, op string, tiers uint8) {
	for t := index.TierGPU; t <= index.TierOther; t++ {
		if tiers&(1<<t) == 0 {
			continue
		}
		for _, k := range b.keys {
			p.op(op, p.x.blockKey(k), holderField(t, p.pod), "")
		}
	}
}

func (p *plan) clear() {
	for _, b := range p.blocks {
		p.holders(b, "d", b.tiers)
	}
	clear(p.blocks)
	p.op("c", p.engKey, "", "")
}

func (p *plan) stored(model string, ev *events.Event) {
	x := p.x
	bs := x.keyer.BlockSize()
	eb := ev.BlockSize
	if eb == 0 {
		eb = bs
	}
	if eb%bs != 0 || len(ev.TokenIDs) != len(ev.BlockHashes)*eb {
		p.st.Malformed++
		return
	}
	var parent blockkey.Key
	if ev.HasParent {
		pb, ok := p.blocks[ev.ParentHash]
		if !ok {
			p.st.UnknownParent++
			return
		}
		parent = pb.last()
	} else {
		root := model
		if ev.LoRAName != "" {
			root = ev.LoRAName
		}
		parent = x.keyer.Root(root)
	}
	tier := index.TierOf(ev.Medium)
	for j, h := range ev.BlockHashes {
		keys := x.keyer.Chain(nil, parent, ev.TokenIDs[j*eb:(j+1)*eb])
		parent = keys[len(keys)-1]
		b, held := p.blocks[h]
		if held && b.last() != parent {
			// the engine reused a hash for other tokens: the old keys go
			p.holders(b, "d", b.tiers)
			held = false
		}
		if held && b.tiers&(1<<tier) != 0 {
			continue // stored already (a repeated event)
		}
		if !held {
			b = engineBlock{keys: keys}
		}
		p.holders(engineBlock{keys: b.keys}, "i", 1<<tier)
		b.tiers |= 1 << tier
		p.blocks[h] = b
		p.op("s", p.engKey, hashField(h), b.encode())
		p.st.Stored += len(keys)
	}
}

func (p *plan) removed(ev *events.Event) {
	tier := index.TierOf(ev.Medium)
	for _, h := range ev.BlockHashes {
		b, ok := p.blocks[h]
		if !ok || b.tiers&(1<<tier) == 0 {
			p.st.UnknownRemoved++
			continue
		}
		p.holders(b, "d", 1<<tier)
		p.st.Removed += len(b.keys)
		b.tiers &^= 1 << tier
		if b.tiers == 0 {
			delete(p.blocks, h)
			p.op("x", p.engKey, hashField(h), "")
		} else {
			p.blocks[h] = b
			p.op("s", p.engKey, hashField(h), b.encode())
		}
	}
}

// Apply applies a batch of the stream unless it was applied before (by
// this replica or another). It returns whether this call applied it and
// what the batch did. ErrLost asks for Reset.
func (x *Index) Apply(ctx context.Context, b Batch) (bool, index.Stats, error) {
	if b.StreamSeq <= x.cursor.Load() {
		return false, index.Stats{}, nil
	}
	p := &plan{x: x, pod: b.Pod, engKey: x.enginesKey(b.Pod)}
	if err := p.load(ctx, b); err != nil {
		return false, index.Stats{}, err
	}
	if b.ClearPod {
		p.clear()
	}
	if b.Events != nil {
		for i := range b.Events.Events {
			ev := &b.Events.Events[i]
			switch {
			case ev.Kind == events.KindAllBlocksCleared:
				p.clear()
				p.st.Cleared++
			case !ev.FullAttention() || ev.Kind == events.KindUnknown:
				p.st.Ignored++
			case ev.Kind == events.KindBlockStored:
				p.stored(b.Model, ev)
			case ev.Kind == events.KindBlockRemoved:
				p.removed(ev)
			}
		}
	}
	x.mu.Lock()
	epoch := x.epoch
	x.mu.Unlock()
	args := append([]string{strconv.FormatUint(b.StreamSeq, 10), epoch, b.Pod, strconv.FormatUint(b.EngineSeq, 10)}, p.ops...)
	res, err := applyScript.Exec(ctx, x.c, []string{x.keys.cursor, x.keys.epoch, x.keys.seqs, x.keys.pods}, args).AsIntSlice()
	if err != nil || len(res) != 2 {
		return false, index.Stats{}, fmt.Errorf("valkey index: apply: %w (reply %v)", err, res)
	}
	if res[0] < 0 {
		return false, index.Stats{}, ErrLost
	}
	for cur := uint64(res[1]); ; {
		old := x.cursor.Load()
		if cur <= old || x.cursor.CompareAndSwap(old, cur) {
			break
		}
	}
	if res[0] == 0 {
		return false, index.Stats{}, nil // another replica applied it first
	}
	return true, p.st, nil
}

// load reads the engine blocks the batch refers to (all of the pod's when
// it clears them).
func (p *plan) load(ctx context.Context, b Batch) error {
	c := p.x.c
	p.blocks = map[uint64]engineBlock{}
	whole := b.ClearPod
	var fields []string
	if b.Events != nil {
		seen := map[uint64]bool{}
		want := func(h uint64) {
			if !seen[h] {
				seen[h] = true
				fields = append(fields, hashField(h))
			}
		}
		for i := range b.Events.Events {
			ev := &b.Events.Events[i]
			switch ev.Kind {
			case events.KindAllBlocksCleared:
				whole = true
			case events.KindBlockStored:
				if ev.HasParent {
					want(ev.ParentHash)
				}
				for _, h := range ev.BlockHashes {
					want(h)
				}
			case events.KindBlockRemoved:
				for _, h := range ev.BlockHashes {
					want(h)
				}
			}
		}
	}
	switch {
	case whole:
		m, err := c.Do(ctx, c.B().Hgetall().Key(p.engKey).Build()).AsStrMap()
		if err != nil {
			return fmt.Errorf("valkey index: engine blocks of %s: %w", p.pod, err)
		}
		for f, v := range m {
			if len(f) == 8 {
				if eb, ok := decodeEngineBlock(v); ok {
					p.blocks[binary.LittleEndian.Uint64([]byte(f))] = eb
				}
			}
		}
	case len(fields) > 0:
		vs, err := c.Do(ctx, c.B().Hmget().Key(p.engKey).Field(fields...).Build()).ToArray()
		if err != nil {
			return fmt.Errorf("valkey index: engine blocks of %s: %w", p.pod, err)
		}
		for i, v := range vs {
			s, err := v.ToString()
			if err != nil {
				continue // nil: not held
			}
			if eb, ok := decodeEngineBlock(s); ok {
				p.blocks[binary.LittleEndian.Uint64([]byte(fields[i]))] = eb
			}
		}
	}
	return nil
}
