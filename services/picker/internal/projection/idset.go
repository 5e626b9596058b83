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
	cur     map[uint64]struct{}
	prev    map[uint64]struct{}
	rotated time.Time
}

func newIDSet(window time.Duration, now func() time.Time) *idSet {
	return &idSet{window: window, now: now, cur: map[uint64]struct{}{}, prev: map[uint64]struct{}{}, rotated: now()}
}

// add records id and reports whether it was new.
func (s *idSet) add(id uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if now := s.now(); now.Sub(s.rotated) >= s.window {
		s.prev, s.cur = s.cur, make(map[uint64]struct{}, len(s.cur))
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
	s.cur[id] = struct{}{}
	return true
}

func (s *idSet) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.cur) + len(s.prev)
}
