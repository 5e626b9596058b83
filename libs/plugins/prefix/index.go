package prefix

import (
	"encoding/binary"
	"sync"

	"github.com/cespare/xxhash/v2"

	"github.com/hermod/hermod/libs/scheduling"
)

// Hashes cuts text into full blocks of blockChars bytes (at most maxBlocks;
// a trailing partial block is ignored) and appends their chained hashes to
// dst: h(-1) = xxh64(model), h(i) = xxh64(block(i) || le64(h(i-1))). Equal
// prompts for the same model give equal chains on every replica.
func Hashes(model string, text []byte, blockChars, maxBlocks int, dst []uint64) []uint64 {
	if blockChars <= 0 {
		return dst
	}
	n := min(len(text)/blockChars, maxBlocks)
	prev := xxhash.Sum64String(model)
	var le [8]byte
	var d xxhash.Digest
	for i := range n {
		d.Reset()
		_, _ = d.Write(text[i*blockChars : (i+1)*blockChars])
		binary.LittleEndian.PutUint64(le[:], prev)
		_, _ = d.Write(le[:])
		prev = d.Sum64()
		dst = append(dst, prev)
	}
	return dst
}

// Index is the approximate prefix index: for each endpoint an LRU of the
// block hashes recently routed to it, and for each block hash the endpoints
// holding it. It is safe for concurrent use.
type Index struct {
	mu      sync.RWMutex
	blocks  map[uint64][]uint32 // block hash -> ids of servers holding it
	servers []*serverLRU        // by id; nil = free
	byName  map[string]uint32
	free    []uint32
}

// NewIndex returns an empty index.
func NewIndex() *Index {
	return &Index{blocks: map[uint64][]uint32{}, byName: map[string]uint32{}}
}

// serverLRU is a fixed-capacity LRU of block hashes over an array of
// doubly linked nodes, so steady-state inserts do not allocate.
type serverLRU struct {
	name     string
	nameHash uint64
	capacity int
	slots    map[uint64]int32
	nodes    []lruNode
	head     int32 // most recently used; -1 when empty
	tail     int32
}

type lruNode struct {
	hash       uint64
	prev, next int32
}

const none int32 = -1

// Add records that endpoint holds blocks hashes[0..n). Earlier blocks are
// touched last so they are the most recently used: an endpoint's LRU evicts
// the ends of prefixes before their beginnings. capacity sizes the
// endpoint's LRU when it is first seen.
func (x *Index) Add(endpoint string, capacity int, hashes []uint64) {
	if len(hashes) == 0 {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	id, ok := x.byName[endpoint]
	if !ok {
		id = x.newServer(endpoint, capacity)
	}
	s := x.servers[id]
	for i := len(hashes) - 1; i >= 0; i-- {
		h := hashes[i]
		if slot, ok := s.slots[h]; ok {
			s.moveToFront(slot)
			continue
		}
		var slot int32
		if len(s.nodes) < s.capacity {
			slot = int32(len(s.nodes))
			s.nodes = append(s.nodes, lruNode{})
		} else {
			slot = s.tail
			s.unlink(slot)
			old := s.nodes[slot].hash
			delete(s.slots, old)
			x.dropHolder(old, id)
		}
		s.nodes[slot].hash = h
		s.pushFront(slot)
		s.slots[h] = slot
		x.blocks[h] = append(x.blocks[h], id)
	}
}

// RemoveEndpoint forgets everything about an endpoint (it left the pool).
func (x *Index) RemoveEndpoint(endpoint string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	id, ok := x.byName[endpoint]
	if !ok {
		return
	}
	s := x.servers[id]
	for h := range s.slots {
		x.dropHolder(h, id)
	}
	delete(x.byName, endpoint)
	x.servers[id] = nil
	x.free = append(x.free, id)
}

// Blocks returns how many blocks the index holds for an endpoint.
func (x *Index) Blocks(endpoint string) int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if id, ok := x.byName[endpoint]; ok {
		return len(x.servers[id].slots)
	}
	return 0
}

// Match records in out (Set), for every endpoint holding block hashes[0], how
// many consecutive blocks from block 0 it holds. It stops at the first
// block no endpoint still in the run holds. The cost is linear in the
// holders of the blocks visited: run[id] counts the blocks server id has
// matched so far, and a holder of block i extends its run only if it held
// all of blocks 0..i-1.
func (x *Index) Match(hashes []uint64, out *scheduling.PrefixMatch) {
	if len(hashes) == 0 {
		return
	}
	x.mu.RLock()
	defer x.mu.RUnlock()
	first := x.blocks[hashes[0]]
	if len(first) == 0 {
		return
	}
	runp := runPool.Get().(*[]int32)
	run := *runp
	if len(run) < len(x.servers) {
		run = make([]int32, len(x.servers))
	}
	for _, id := range first {
		run[id] = 1
	}
	for i := 1; i < len(hashes); i++ {
		extended := false
		for _, id := range x.blocks[hashes[i]] {
			if run[id] == int32(i) {
				run[id] = int32(i + 1)
				extended = true
			}
		}
		if !extended {
			break
		}
	}
	for _, id := range first {
		srv := x.servers[id]
		out.Set(srv.name, srv.nameHash, int(run[id]))
		run[id] = 0
	}
	*runp = run
	runPool.Put(runp)
}

// runPool holds Match's per-call run arrays (all zero between calls).
var runPool = sync.Pool{New: func() any { return new([]int32) }}

func (x *Index) newServer(name string, capacity int) uint32 {
	s := &serverLRU{name: name, nameHash: scheduling.NameHash(name), capacity: max(capacity, 1), slots: map[uint64]int32{}, head: none, tail: none}
	var id uint32
	if n := len(x.free); n > 0 {
		id = x.free[n-1]
		x.free = x.free[:n-1]
		x.servers[id] = s
	} else {
		id = uint32(len(x.servers))
		x.servers = append(x.servers, s)
	}
	x.byName[name] = id
	return id
}

func (x *Index) dropHolder(h uint64, id uint32) {
	ids := x.blocks[h]
	for i, v := range ids {
		if v == id {
			ids[i] = ids[len(ids)-1]
			ids = ids[:len(ids)-1]
			break
		}
	}
	if len(ids) == 0 {
		delete(x.blocks, h)
	} else {
		x.blocks[h] = ids
	}
}

func (s *serverLRU) unlink(slot int32) {
	n := &s.nodes[slot]
	if n.prev != none {
		s.nodes[n.prev].next = n.next
	} else {
		s.head = n.next
	}
	if n.next != none {
		s.nodes[n.next].prev = n.prev
	} else {
		s.tail = n.prev
	}
	n.prev, n.next = none, none
}

func (s *serverLRU) pushFront(slot int32) {
	n := &s.nodes[slot]
	n.prev, n.next = none, s.head
	if s.head != none {
		s.nodes[s.head].prev = slot
	}
	s.head = slot
	if s.tail == none {
		s.tail = slot
	}
}

func (s *serverLRU) moveToFront(slot int32) {
	if s.head == slot {
		return
	}
	s.unlink(slot)
	s.pushFront(slot)
}
