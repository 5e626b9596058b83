package engine

import "github.com/hermod/hermod/tools/vllm-sim/internal/blockhash"

// blockPool is the KV block pool with prefix caching, modelled on vLLM's:
// blocks are reference counted; a block whose count drops to zero joins the
// tail of the free queue but keeps its cached contents, so a later request
// with the same prefix can take it back; allocation takes blocks from the
// head of the free queue (least recently freed first) and evicts their
// cached contents. As in vLLM, several physical blocks may hold the same
// hash (requests that computed the same prefix at once); each is cached and
// evicted on its own. Every change to the cached set is reported to the
// event sink: BlockStored per block cached, BlockRemoved per block evicted,
// AllBlocksCleared on reset.
type blockPool struct {
	blocks   []block
	head     int32 // free queue: head is evicted first
	tail     int32
	numFree  int
	cached   map[uint64][]int32 // wire hash -> blocks holding it
	onRemove func(hash uint64)
}

type block struct {
	ref        int32
	hash       uint64 // wire hash of the cached contents; 0 when not cached
	digest     blockhash.Digest
	prev, next int32 // free queue links; noBlock at the ends
	free       bool
}

const noBlock int32 = -1

func newBlockPool(n int, onRemove func(hash uint64)) *blockPool {
	p := &blockPool{blocks: make([]block, n), cached: make(map[uint64][]int32), onRemove: onRemove}
	p.resetFree()
	return p
}

func (p *blockPool) resetFree() {
	p.head, p.tail, p.numFree = noBlock, noBlock, 0
	for i := range p.blocks {
		p.blocks[i] = block{prev: noBlock, next: noBlock}
		p.pushTail(int32(i))
	}
}

// usage is the fraction of blocks in use (vllm:kv_cache_usage_perc):
// blocks held by requests, not cached-but-free ones.
func (p *blockPool) usage() float64 {
	return 1 - float64(p.numFree)/float64(len(p.blocks))
}

// lookup returns how many of hashes, from the first, are cached.
func (p *blockPool) lookup(hashes []uint64) int {
	for i, h := range hashes {
		if _, ok := p.cached[h]; !ok {
			return i
		}
	}
	return len(hashes)
}

// freeAmong counts the cached blocks take would pick for hashes that are
// in the free queue (taking them makes them unavailable for allocation).
func (p *blockPool) freeAmong(hashes []uint64) int {
	n := 0
	for _, h := range hashes {
		if p.blocks[p.cached[h][0]].free {
			n++
		}
	}
	return n
}

// take adds a reference to a cached block of each of hashes and appends
// their ids to dst. The caller has checked them with lookup.
func (p *blockPool) take(dst []int32, hashes []uint64) []int32 {
	for _, h := range hashes {
		id := p.cached[h][0]
		b := &p.blocks[id]
		if b.free {
			p.unlink(id)
		}
		b.ref++
		dst = append(dst, id)
	}
	return dst
}

// share adds a reference to each of ids, blocks another sequence holds,
// and appends them to dst.
func (p *blockPool) share(dst []int32, ids []int32) []int32 {
	for _, id := range ids {
		p.blocks[id].ref++
	}
	return append(dst, ids...)
}

// holds reports whether block id caches the contents d.
func (p *blockPool) holds(id int32, d blockhash.Digest) bool {
	return p.blocks[id].hash != 0 && p.blocks[id].hash == wireHash(d)
}

// allocate appends n fresh blocks to dst, evicting cached contents from the
// head of the free queue; it allocates nothing and reports false when fewer
// than n blocks are free.
func (p *blockPool) allocate(dst []int32, n int) ([]int32, bool) {
	if n > p.numFree {
		return dst, false
	}
	for range n {
		id := p.head
		p.unlink(id)
		b := &p.blocks[id]
		if b.hash != 0 {
			p.evict(id)
		}
		b.ref = 1
		dst = append(dst, id)
	}
	return dst, true
}

// release drops one reference to each block, last first, so that the tail
// blocks of a sequence are evicted before its head blocks.
func (p *blockPool) release(ids []int32) {
	for i := len(ids) - 1; i >= 0; i-- {
		id := ids[i]
		b := &p.blocks[id]
		b.ref--
		if b.ref == 0 {
			p.pushTail(id)
		}
	}
}

// cache registers a full block's contents (another block may already hold
// the same hash).
func (p *blockPool) cache(id int32, d blockhash.Digest) {
	h := wireHash(d)
	b := &p.blocks[id]
	b.hash, b.digest = h, d
	p.cached[h] = append(p.cached[h], id)
}

// reset empties the pool (an engine restart, or a prefix-cache reset).
func (p *blockPool) reset() {
	clear(p.cached)
	p.resetFree()
}

// cachedHashes returns how many blocks hold each cached hash (tests).
func (p *blockPool) cachedHashes() map[uint64]int {
	out := make(map[uint64]int, len(p.cached))
	for h, ids := range p.cached {
		out[h] = len(ids)
	}
	return out
}

func (p *blockPool) evict(id int32) {
	b := &p.blocks[id]
	ids := p.cached[b.hash]
	for i, v := range ids {
		if v == id {
			ids = append(ids[:i], ids[i+1:]...)
			break
		}
	}
	if len(ids) == 0 {
		delete(p.cached, b.hash)
	} else {
		p.cached[b.hash] = ids
	}
	if p.onRemove != nil {
		p.onRemove(b.hash)
	}
	b.hash = 0
}

func (p *blockPool) pushTail(id int32) {
	b := &p.blocks[id]
	b.prev, b.next, b.free = p.tail, noBlock, true
	if p.tail != noBlock {
		p.blocks[p.tail].next = id
	} else {
		p.head = id
	}
	p.tail = id
	p.numFree++
}

func (p *blockPool) unlink(id int32) {
	b := &p.blocks[id]
	if b.prev != noBlock {
		p.blocks[b.prev].next = b.next
	} else {
		p.head = b.next
	}
	if b.next != noBlock {
		p.blocks[b.next].prev = b.prev
	} else {
		p.tail = b.prev
	}
	b.prev, b.next, b.free = noBlock, noBlock, false
	p.numFree--
}

// wireHash is a digest as KV events carry it; 0 is reserved for "not
// cached", so a digest whose wire form is 0 is cached as 1 (a one-in-2^64
// event, kept so the sentinel stays unambiguous).
func wireHash(d blockhash.Digest) uint64 {
	if h := d.Wire(); h != 0 {
		return h
	}
	return 1
}
