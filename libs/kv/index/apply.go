package index

import (
	"sync"

	"github.com/hermod/hermod/libs/kv/blockkey"
	"github.com/hermod/hermod/libs/kv/events"
)

// pod is what the index knows of one pod: the keys of every engine block
// it holds, by engine hash, to chain stored blocks to their parents and to
// apply removals.
type pod struct {
	mu     sync.Mutex
	id     uint32
	name   string
	blocks map[uint64]podBlock
}

// podBlock is an engine block: its index keys (several when the engine's
// block size is a multiple of the index's) and the tiers it is on.
type podBlock struct {
	last  blockkey.Key   // the key of the block's last index block
	more  []blockkey.Key // the keys before it, in order (nil when 1:1)
	tiers tierSet
}

// Stats count what Apply did with a batch.
type Stats struct {
	// Stored and Removed count index blocks stored and removed.
	Stored  int `json:"stored"`
	Removed int `json:"removed"`
	// Cleared counts AllBlocksCleared events.
	Cleared int `json:"cleared"`
	// UnknownParent counts BlockStored events dropped because their parent
	// block is not known (a gap: repair by replay).
	UnknownParent int `json:"unknown_parent"`
	// UnknownRemoved counts removed engine blocks the pod did not hold.
	UnknownRemoved int `json:"unknown_removed"`
	// Malformed counts events dropped as inconsistent (token count, block
	// size not a multiple of the index's).
	Malformed int `json:"malformed"`
	// Ignored counts events the index does not track (other attention
	// kinds, unknown types).
	Ignored int `json:"ignored"`
}

// Add sums stats.
func (s *Stats) Add(o Stats) {
	s.Stored += o.Stored
	s.Removed += o.Removed
	s.Cleared += o.Cleared
	s.UnknownParent += o.UnknownParent
	s.UnknownRemoved += o.UnknownRemoved
	s.Malformed += o.Malformed
	s.Ignored += o.Ignored
}

// Apply applies a batch of the named pod's events; model is the model the
// pod serves (the chain root of blocks without a LoRA adapter). Events of
// one pod must be applied in order; different pods may be applied
// concurrently.
func (x *Index) Apply(podName, model string, b *events.Batch) Stats {
	p := x.pod(podName, true)
	p.mu.Lock()
	defer p.mu.Unlock()
	var st Stats
	var kbuf [16]blockkey.Key
	keys := kbuf[:0]
	for i := range b.Events {
		ev := &b.Events[i]
		switch {
		case ev.Kind == events.KindAllBlocksCleared:
			x.clear(p)
			st.Cleared++
		case !ev.FullAttention() || ev.Kind == events.KindUnknown:
			st.Ignored++
		case ev.Kind == events.KindBlockStored:
			keys = x.stored(p, model, ev, keys[:0], &st)
		case ev.Kind == events.KindBlockRemoved:
			x.removed(p, ev, &st)
		}
	}
	return st
}

func (x *Index) stored(p *pod, model string, ev *events.Event, keys []blockkey.Key, st *Stats) []blockkey.Key {
	bs := x.cfg.BlockSize
	eb := ev.BlockSize
	if eb == 0 {
		eb = bs
	}
	if eb%bs != 0 || len(ev.TokenIDs) != len(ev.BlockHashes)*eb {
		st.Malformed++
		return keys
	}
	var parent blockkey.Key
	if ev.HasParent {
		pb, ok := p.blocks[ev.ParentHash]
		if !ok {
			st.UnknownParent++
			return keys
		}
		parent = pb.last
	} else {
		root := model
		if ev.LoRAName != "" {
			root = ev.LoRAName
		}
		parent = x.keyer.Root(root)
	}
	tier := TierOf(ev.Medium)
	ratio := eb / bs
	for j, h := range ev.BlockHashes {
		keys = x.keyer.Chain(keys[:0], parent, ev.TokenIDs[j*eb:(j+1)*eb])
		parent = keys[len(keys)-1]
		pb := p.blocks[h]
		if pb.tiers != 0 && pb.last != parent {
			// the engine reused a hash for other tokens: the old keys go
			x.unstore(p, pb, pb.tiers)
			pb = podBlock{}
		}
		if pb.tiers.has(tier) {
			continue // stored already (a repeated event)
		}
		if pb.tiers == 0 {
			pb = podBlock{last: parent}
			if ratio > 1 {
				pb.more = append([]blockkey.Key(nil), keys[:ratio-1]...)
			}
		}
		for _, k := range keys {
			s := x.shardOf(k)
			s.mu.Lock()
			s.store(k, p.id, tier)
			s.mu.Unlock()
		}
		pb.tiers |= 1 << tier
		p.blocks[h] = pb
		st.Stored += len(keys)
	}
	return keys
}

func (x *Index) removed(p *pod, ev *events.Event, st *Stats) {
	tier := TierOf(ev.Medium)
	for _, h := range ev.BlockHashes {
		pb, ok := p.blocks[h]
		if !ok || !pb.tiers.has(tier) {
			st.UnknownRemoved++
			continue
		}
		st.Removed += x.unstore(p, pb, 1<<tier)
		pb.tiers &^= 1 << tier
		if pb.tiers == 0 {
			delete(p.blocks, h)
		} else {
			p.blocks[h] = pb
		}
	}
}

// unstore removes the pod from the block's keys on the given tiers and
// returns how many keys it held.
func (x *Index) unstore(p *pod, pb podBlock, tiers tierSet) int {
	n := 0
	for _, k := range pb.more {
		n += x.unstoreKey(k, p.id, tiers)
	}
	return n + x.unstoreKey(pb.last, p.id, tiers)
}

func (x *Index) unstoreKey(k blockkey.Key, pod uint32, tiers tierSet) int {
	s := x.shardOf(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.remove(k, pod, tiers) {
		return 1
	}
	return 0
}

// clear forgets every block of the pod. The caller holds p.mu.
func (x *Index) clear(p *pod) {
	for _, pb := range p.blocks {
		x.unstore(p, pb, pb.tiers)
	}
	clear(p.blocks)
}

// ClearPod forgets every block of the named pod (the pod restarted, left
// the pool, or its history was lost and is being rebuilt).
func (x *Index) ClearPod(podName string) {
	p := x.pod(podName, false)
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	x.clear(p)
}
