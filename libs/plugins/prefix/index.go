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

// Index is the approximate prefix index: for each endpoint the block
// hashes recently routed to it, up to a capacity, and for each block hash
// the endpoints holding it. Recency is not arrival order but the stamp
// (decision time, decision id) of the latest decision that routed a block
// to the endpoint: an endpoint over capacity drops the block with the
// oldest stamp. So replicas that apply the same decisions in different
// orders, or apply one twice, hold the same blocks. It is safe for
// concurrent use.
type Index struct {
	mu      sync.RWMutex
	blocks  map[uint64][]uint32 // block hash -> ids of servers holding it
	servers []*serverBlocks     // by id; nil = free
	byName  map[string]uint32
	free    []uint32
}

// NewIndex returns an empty index.
func NewIndex() *Index {
	return &Index{blocks: map[uint64][]uint32{}, byName: map[string]uint32{}}
}

// serverBlocks is one endpoint's blocks: entries in slots that do not move
// (slots maps a hash to its slot once), and a min-heap of slots by stamp,
// so the oldest is evicted first; pos[slot] is the slot's heap position.
// Reordering the heap touches no map.
type serverBlocks struct {
	name     string
	nameHash uint64
	capacity int
	capSet   bool             // an effect set capacity (else it is the default)
	capStamp scheduling.Stamp // the stamp of the effect that set it
	slots    map[uint64]int32 // block hash -> slot
	entries  []blockEntry     // by slot
	pos      []int32          // slot -> index in heap
	heap     []int32          // slots, oldest entry first
	free     []int32          // unused slots
}

// blockEntry is one held block. Within one decision, earlier blocks of the
// prompt are newer (pos is higher), so the ends of prefixes are evicted
// before their beginnings.
type blockEntry struct {
	hash  uint64
	stamp scheduling.Stamp
	pos   uint32
}

func (a blockEntry) older(b blockEntry) bool {
	if c := a.stamp.Compare(b.stamp); c != 0 {
		return c < 0
	}
	return a.pos < b.pos
}

// Add records that endpoint holds blocks hashes[0..n) as of the decision
// stamped st. capacity > 0 sets the endpoint's capacity (the latest stamp
// decides); 0 keeps it (or gives a new endpoint defaultCapacity).
func (x *Index) Add(endpoint string, capacity, defaultCapacity int, hashes []uint64, st scheduling.Stamp) {
	if len(hashes) == 0 {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	id, ok := x.byName[endpoint]
	if !ok {
		id = x.newServer(endpoint, max(defaultCapacity, 1))
	}
	s := x.servers[id]
	if capacity > 0 && (!s.capSet || st.Compare(s.capStamp) > 0) {
		s.capacity, s.capSet, s.capStamp = capacity, true, st
		for len(s.heap) > s.capacity {
			x.evictOldest(s, id)
		}
	}
	n := uint32(len(hashes))
	for i, h := range hashes {
		e := blockEntry{hash: h, stamp: st, pos: n - uint32(i)}
		if slot, ok := s.slots[h]; ok {
			if s.entries[slot].older(e) {
				s.entries[slot] = e
				s.down(int(s.pos[slot]))
			}
			continue
		}
		if len(s.heap) >= s.capacity {
			if !s.entries[s.heap[0]].older(e) {
				continue // older than everything held: it would go first
			}
			x.evictOldest(s, id)
		}
		var slot int32
		if k := len(s.free); k > 0 {
			slot, s.free = s.free[k-1], s.free[:k-1]
			s.entries[slot] = e
		} else {
			slot = int32(len(s.entries))
			s.entries = append(s.entries, e)
			s.pos = append(s.pos, 0)
		}
		s.slots[h] = slot
		s.heap = append(s.heap, slot)
		s.pos[slot] = int32(len(s.heap) - 1)
		s.up(len(s.heap) - 1)
		x.blocks[h] = append(x.blocks[h], id)
	}
}

// evictOldest drops the server's oldest block.
func (x *Index) evictOldest(s *serverBlocks, id uint32) {
	slot := s.heap[0]
	old := s.entries[slot].hash
	last := len(s.heap) - 1
	s.swap(0, last)
	s.heap = s.heap[:last]
	if last > 0 {
		s.down(0)
	}
	delete(s.slots, old)
	s.free = append(s.free, slot)
	x.dropHolder(old, id)
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

// Entries returns how many blocks the index holds, over every endpoint.
func (x *Index) Entries() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	n := 0
	for _, s := range x.servers {
		if s != nil {
			n += len(s.heap)
		}
	}
	return n
}

// Blocks returns how many blocks the index holds for an endpoint.
func (x *Index) Blocks(endpoint string) int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if id, ok := x.byName[endpoint]; ok {
		return len(x.servers[id].heap)
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

// MatchAny sets in out, for each endpoint holding any of hashes, how many
// of them it holds, wherever they are in the list (a set, not a prefix:
// the media items of a request, say). hashes holds no duplicates.
func (x *Index) MatchAny(hashes []uint64, out *scheduling.PrefixMatch) {
	if len(hashes) == 0 {
		return
	}
	x.mu.RLock()
	defer x.mu.RUnlock()
	runp := runPool.Get().(*[]int32)
	run := *runp
	if len(run) < len(x.servers) {
		run = make([]int32, len(x.servers))
	}
	var seen []uint32
	for _, h := range hashes {
		for _, id := range x.blocks[h] {
			if run[id] == 0 {
				seen = append(seen, id)
			}
			run[id]++
		}
	}
	for _, id := range seen {
		srv := x.servers[id]
		out.Set(srv.name, srv.nameHash, int(run[id]))
		run[id] = 0
	}
	*runp = run
	runPool.Put(runp)
}

// Holds reports whether endpoint holds hash.
func (x *Index) Holds(endpoint string, hash uint64) bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	id, ok := x.byName[endpoint]
	if !ok {
		return false
	}
	_, held := x.servers[id].slots[hash]
	return held
}

// runPool holds Match's per-call run arrays (all zero between calls).
var runPool = sync.Pool{New: func() any { return new([]int32) }}

func (x *Index) newServer(name string, capacity int) uint32 {
	s := &serverBlocks{name: name, nameHash: scheduling.NameHash(name), capacity: capacity, slots: map[uint64]int32{}}
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

func (s *serverBlocks) swap(i, j int) {
	s.heap[i], s.heap[j] = s.heap[j], s.heap[i]
	s.pos[s.heap[i]] = int32(i)
	s.pos[s.heap[j]] = int32(j)
}

// less reports whether heap position i holds an older entry than j.
func (s *serverBlocks) less(i, j int) bool { return s.entries[s.heap[i]].older(s.entries[s.heap[j]]) }

func (s *serverBlocks) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !s.less(i, parent) {
			return
		}
		s.swap(i, parent)
		i = parent
	}
}

func (s *serverBlocks) down(i int) {
	n := len(s.heap)
	for {
		oldest, l, r := i, 2*i+1, 2*i+2
		if l < n && s.less(l, oldest) {
			oldest = l
		}
		if r < n && s.less(r, oldest) {
			oldest = r
		}
		if oldest == i {
			return
		}
		s.swap(i, oldest)
		i = oldest
	}
}
