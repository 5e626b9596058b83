package index

import (
	"sync"

	"github.com/hermod/hermod/libs/kv/blockkey"
)

// specRef is a speculative holder of a key until its expiry (Unix nanos).
type specRef struct {
	pod     uint32
	expires int64
}

// speculative holds the entries added right after routing decisions: the
// chosen pod will hold the prompt's blocks once it has prefilled them, but
// its events take a moment to arrive. They expire on their own; the
// engine's BlockStored puts the key in the confirmed index, which Match
// consults first.
type speculative struct {
	shards []specShard
	mask   uint64
}

type specShard struct {
	mu   sync.RWMutex
	refs map[blockkey.Key][]specRef
}

// maxSpeculativePerShard bounds the speculative entries of a shard; adds
// beyond it are dropped (they are hints).
const maxSpeculativePerShard = 1 << 16

func (s *speculative) init(shards int) {
	s.shards = make([]specShard, shards)
	s.mask = uint64(shards - 1)
	for i := range s.shards {
		s.shards[i].refs = map[blockkey.Key][]specRef{}
	}
}

func (s *speculative) shardOf(k blockkey.Key) *specShard {
	h := uint64(k)
	return &s.shards[(h^h>>32)&s.mask]
}

// AddSpeculative records that the named pod will hold keys until expires
// (Unix nanos), unless the engine's events say so first. It returns how
// many keys were recorded.
func (x *Index) AddSpeculative(podName string, keys []blockkey.Key, now, expires int64) int {
	p := x.pod(podName, true)
	n := 0
	for _, k := range keys {
		s := x.spec.shardOf(k)
		s.mu.Lock()
		refs := s.refs[k]
		// drop the expired and this pod's older entry
		kept := refs[:0]
		for _, r := range refs {
			if r.expires > now && r.pod != p.id {
				kept = append(kept, r)
			}
		}
		if len(kept) == 0 && len(s.refs) >= maxSpeculativePerShard {
			s.purge(now)
			if len(s.refs) >= maxSpeculativePerShard {
				s.mu.Unlock()
				continue
			}
		}
		s.refs[k] = append(kept, specRef{pod: p.id, expires: expires})
		n++
		s.mu.Unlock()
	}
	return n
}

// purge drops expired entries. The caller holds s.mu.
func (s *specShard) purge(now int64) {
	for k, refs := range s.refs {
		kept := refs[:0]
		for _, r := range refs {
			if r.expires > now {
				kept = append(kept, r)
			}
		}
		if len(kept) == 0 {
			delete(s.refs, k)
		} else {
			s.refs[k] = kept
		}
	}
}

// PurgeSpeculative drops every expired speculative entry.
func (x *Index) PurgeSpeculative(now int64) {
	for i := range x.spec.shards {
		s := &x.spec.shards[i]
		s.mu.Lock()
		s.purge(now)
		s.mu.Unlock()
	}
}

// EachSpeculative calls fn with every pod that holds k speculatively at
// now (Unix nanos). fn runs under the index's locks and must not call it.
func (x *Index) EachSpeculative(k blockkey.Key, now int64, fn func(pod string)) {
	s := x.spec.shardOf(k)
	s.mu.RLock()
	defer s.mu.RUnlock()
	refs := s.refs[k]
	if len(refs) == 0 {
		return
	}
	x.podsMu.RLock()
	defer x.podsMu.RUnlock()
	for _, r := range refs {
		if r.expires > now && int(r.pod) < len(x.podNames) {
			fn(x.podNames[r.pod])
		}
	}
}
