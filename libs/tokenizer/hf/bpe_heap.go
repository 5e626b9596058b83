package hf

// symbol is a node of the doubly linked list mergeHeap works on; dead
// symbols have been merged into their left neighbour.
type symbol struct {
	id         uint32
	prev, next int32
	dead       bool
}

// candidate is a possible merge of the symbol at pos with its right
// neighbour into id; it is stale if either has changed since. Candidates
// are ordered by key: rank, then position.
type candidate struct {
	key uint64 // rank<<32 | pos
	id  uint32
}

func newCandidate(mg merge, pos int32) candidate {
	return candidate{key: uint64(mg.rank)<<32 | uint64(uint32(pos)), id: mg.id}
}

func (c candidate) pos() int32 { return int32(uint32(c.key)) }

// mergeHeap merges word with a priority queue of candidate merges, in
// O(n log n) for long words (whitespace runs, text without spaces).
func (m *bpe) mergeHeap(dst []uint32, word string, sc *scratch) []uint32 {
	syms := sc.syms[:0]
	for i := range len(word) {
		syms = append(syms, symbol{id: m.byteIDs[word[i]], prev: int32(i - 1), next: int32(i + 1)})
	}
	syms[len(syms)-1].next = -1
	h := sc.heap[:0]
	for i := 0; i+1 < len(word); i++ {
		if mg := m.bytePair(word[i], word[i+1]); mg.rank != noRank {
			h = append(h, newCandidate(mg, int32(i)))
		}
	}
	return m.heapLoop(dst, syms, h, sc)
}

// mergeHeapIDs is mergeHeap for a word already turned into symbols (ids,
// not empty).
func (m *bpe) mergeHeapIDs(dst, ids []uint32, sc *scratch) []uint32 {
	syms := sc.syms[:0]
	for i, id := range ids {
		syms = append(syms, symbol{id: id, prev: int32(i - 1), next: int32(i + 1)})
	}
	syms[len(syms)-1].next = -1
	h := sc.heap[:0]
	for i := 0; i+1 < len(ids); i++ {
		if mg := m.lookup(ids[i], ids[i+1]); mg.rank != noRank {
			h = append(h, newCandidate(mg, int32(i)))
		}
	}
	return m.heapLoop(dst, syms, h, sc)
}

// heapLoop merges the linked symbols syms, taking candidate merges from
// the heap h (not yet ordered).
func (m *bpe) heapLoop(dst []uint32, syms []symbol, h candidateHeap, sc *scratch) []uint32 {
	h.init()
	for len(h) > 0 {
		c := h.pop()
		pos := c.pos()
		s := &syms[pos]
		if s.dead || s.next < 0 {
			continue
		}
		right := &syms[s.next]
		if m.lookup(s.id, right.id).id != c.id {
			continue // stale: a neighbour has merged since
		}
		s.id = c.id
		right.dead = true
		s.next = right.next
		if s.next >= 0 {
			syms[s.next].prev = pos
			if mg := m.lookup(s.id, syms[s.next].id); mg.rank != noRank {
				h.push(newCandidate(mg, pos))
			}
		}
		if s.prev >= 0 {
			if mg := m.lookup(syms[s.prev].id, s.id); mg.rank != noRank {
				h.push(newCandidate(mg, s.prev))
			}
		}
	}
	for i := int32(0); i >= 0; i = syms[i].next {
		dst = append(dst, syms[i].id)
	}
	sc.syms, sc.heap = syms, h
	return dst
}

// candidateHeap is a binary min-heap of candidates by key.
type candidateHeap []candidate

func (h *candidateHeap) push(c candidate) {
	*h = append(*h, c)
	s := *h
	for i := len(s) - 1; i > 0; {
		parent := (i - 1) / 2
		if s[i].key >= s[parent].key {
			break
		}
		s[i], s[parent] = s[parent], s[i]
		i = parent
	}
}

// init orders the heap in O(n).
func (h candidateHeap) init() {
	for i := len(h)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func (h *candidateHeap) pop() candidate {
	s := *h
	top := s[0]
	last := len(s) - 1
	s[0] = s[last]
	*h = s[:last]
	h.down(0)
	return top
}

// down moves the element at i down to its place.
func (h candidateHeap) down(i int) {
	s := h
	for {
		small, l, r := i, 2*i+1, 2*i+2
		if l < len(s) && s[l].key < s[small].key {
			small = l
		}
		if r < len(s) && s[r].key < s[small].key {
			small = r
		}
		if small == i {
			break
		}
		s[i], s[small] = s[small], s[i]
		i = small
	}
}
