package projection

import (
	"sync"
	"time"
)

// idSet remembers ids for at least a window and at most twice it, in two
// generations: when the current generation is a window old it becomes the
// previous one and the one before is dropped. Memory is bounded by the rate
// of ids times twice the window.
type idSet struct {
	mu      sync.Mutex
	window  time.Duration
	now     func() time.Time
	cur     map[uint64]bool // id -> recorded as this replica's own
	prev    map[uint64]bool
	rotated time.Time
}

func newIDSet(window time.Duration, now func() time.Time) *idSet {
	return &idSet{window: window, now: now, cur: map[uint64]bool{}, prev: map[uint64]bool{}, rotated: now()}
}

// add records id and reports whether it was new.
func (s *idSet) add(id uint64) bool { return s.record(id, false) }

// addOwn records id as this replica's own and reports whether it was new.
func (s *idSet) addOwn(id uint64) bool { return s.record(id, true) }

func (s *idSet) record(id uint64, own bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if now := s.now(); now.Sub(s.rotated) >= s.window {
		s.prev, s.cur = s.cur, make(map[uint64]bool, len(s.cur))
		if now.Sub(s.rotated) >= 2*s.window {
			clear(s.prev)
		}
		s.rotated = now
	}
	if _, ok := s.cur[id]; ok {
		return false
	}
	if _, ok := s.prev[id]; ok {
		return false
	}
	s.cur[id] = own
	return true
}

// has reports whether id is recorded, and whether as this replica's own.
func (s *idSet) has(id uint64) (seen, own bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if own, ok := s.cur[id]; ok {
		return true, own
	}
	own, ok := s.prev[id]
	return ok, own
}

func (s *idSet) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.cur) + len(s.prev)
}
