package flowcontrol

import "sync"

// Slots is a Capacity of a fixed number of requests in flight (the
// gateway's maxConcurrency), further gated by a saturation signal (the
// pool's metrics), which may be nil.
type Slots struct {
	mu        sync.Mutex
	max, used int
	saturated func() bool
}

// NewSlots returns max slots (0: unbounded) gated by saturated.
func NewSlots(max int, saturated func() bool) *Slots {
	return &Slots{max: max, saturated: saturated}
}

// TryAcquire implements Capacity.
func (s *Slots) TryAcquire() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if (s.max > 0 && s.used >= s.max) || (s.saturated != nil && s.saturated()) {
		return false
	}
	s.used++
	return true
}

// Release implements Capacity.
func (s *Slots) Release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.used > 0 {
		s.used--
	}
}

// InUse returns the slots taken.
func (s *Slots) InUse() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.used
}
