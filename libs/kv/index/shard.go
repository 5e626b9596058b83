package index

import (
	"sync"

	"github.com/hermod/hermod/libs/kv/blockkey"
)

// podRef is a pod holding a key: how many of its engine blocks hold the
// key on each tier (several when the engine hashes the same tokens
// differently, e.g. with a cache salt the index does not key by).
type podRef struct {
	pod  uint32
	refs [numTiers]uint16
}

// tiers returns the tiers the pod holds the key on.
func (r *podRef) tiers() tierSet {
	var s tierSet
	for t, n := range r.refs {
		if n > 0 {
			s |= 1 << t
		}
	}
	return s
}

// entry is a key's pods, oldest store first, and its place in the shard's
// LRU list.
type entry struct {
	key        blockkey.Key
	prev, next int32
	pods       []podRef
}

const none = -1

// shard is a slice of the key space: a map from key to a slot of its
// entry slab, and an intrusive LRU list over the slots (head: most
// recently stored). Freed slots keep their pods slice for reuse, so a
// steady index allocates nothing per event.
type shard struct {
	mu         sync.RWMutex
	slots      map[blockkey.Key]int32
	entries    []entry
	free       []int32
	head, tail int32
	max        int
	podCap     int
	evicted    uint64
	// bytes estimates the memory the shard's keys take (entryBytes each
	// plus holderBytes per holder); maxBytes bounds it (0: no bound).
	bytes, maxBytes int64
}

// Memory estimates of the cost-aware bound: a key's map entry, slab entry
// and LRU links, and each holder in its list.
const (
	entryBytes  = 96
	holderBytes = 16
)

func (s *shard) init(maxKeys, podCap int, maxBytes int64) {
	s.slots = make(map[blockkey.Key]int32)
	s.head, s.tail = none, none
	s.max, s.podCap, s.maxBytes = maxKeys, podCap, maxBytes
}

// full reports whether a new key must first push out the oldest.
func (s *shard) full() bool {
	return len(s.slots) >= s.max || (s.maxBytes > 0 && s.bytes+entryBytes+holderBytes > s.maxBytes)
}

func (s *shard) unlink(i int32) {
	e := &s.entries[i]
	if e.prev != none {
		s.entries[e.prev].next = e.next
	} else {
		s.head = e.next
	}
	if e.next != none {
		s.entries[e.next].prev = e.prev
	} else {
		s.tail = e.prev
	}
	e.prev, e.next = none, none
}

func (s *shard) pushFront(i int32) {
	e := &s.entries[i]
	e.prev, e.next = none, s.head
	if s.head != none {
		s.entries[s.head].prev = i
	}
	s.head = i
	if s.tail == none {
		s.tail = i
	}
}

// drop frees slot i. The caller holds s.mu.
func (s *shard) drop(i int32) {
	s.unlink(i)
	e := &s.entries[i]
	delete(s.slots, e.key)
	s.bytes -= entryBytes + holderBytes*int64(len(e.pods))
	e.pods = e.pods[:0]
	s.free = append(s.free, i)
}

// store records that pod holds key on tier: the key becomes the most
// recently stored, and pod its most recent holder. It returns whether a
// new key was created. The caller holds s.mu.
func (s *shard) store(key blockkey.Key, pod uint32, tier Tier) bool {
	i, ok := s.slots[key]
	created := false
	if !ok {
		for s.full() && s.tail != none {
			s.drop(s.tail)
			s.evicted++
		}
		if n := len(s.free); n > 0 {
			i = s.free[n-1]
			s.free = s.free[:n-1]
		} else {
			s.entries = append(s.entries, entry{pods: make([]podRef, 0, min(s.podCap, 4))})
			i = int32(len(s.entries) - 1)
		}
		s.entries[i].key = key
		s.slots[key] = i
		s.bytes += entryBytes
		s.pushFront(i)
		created = true
	} else if s.head != i {
		s.unlink(i)
		s.pushFront(i)
	}
	e := &s.entries[i]
	for j := range e.pods {
		if e.pods[j].pod == pod {
			ref := e.pods[j]
			if ref.refs[tier] < ^uint16(0) {
				ref.refs[tier]++
			}
			copy(e.pods[j:], e.pods[j+1:])
			e.pods[len(e.pods)-1] = ref
			return created
		}
	}
	if len(e.pods) >= s.podCap {
		copy(e.pods, e.pods[1:])
		e.pods = e.pods[:len(e.pods)-1]
		s.bytes -= holderBytes
	}
	ref := podRef{pod: pod}
	ref.refs[tier] = 1
	e.pods = append(e.pods, ref)
	s.bytes += holderBytes
	return created
}

// remove drops one of the pod's references to key on each of the given
// tiers; a key no pod holds leaves the index. It reports whether the pod
// held the key. The caller holds s.mu.
func (s *shard) remove(key blockkey.Key, pod uint32, tiers tierSet) bool {
	i, ok := s.slots[key]
	if !ok {
		return false
	}
	e := &s.entries[i]
	for j := range e.pods {
		r := &e.pods[j]
		if r.pod != pod {
			continue
		}
		for t := range r.refs {
			if tiers.has(Tier(t)) && r.refs[t] > 0 {
				r.refs[t]--
			}
		}
		if r.tiers() == 0 {
			e.pods = append(e.pods[:j], e.pods[j+1:]...)
			s.bytes -= holderBytes
			if len(e.pods) == 0 {
				s.drop(i)
			}
		}
		return true
	}
	return false
}

// holders returns the pods of key (valid until s.mu is released).
func (s *shard) holders(key blockkey.Key) []podRef {
	if i, ok := s.slots[key]; ok {
		return s.entries[i].pods
	}
	return nil
}
