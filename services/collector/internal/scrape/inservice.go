package scrape

import (
	"sync"
	"sync/atomic"
)

// inService holds the poll in service of a kind (the models poll, the
// attribute polls) that every target's loop reads and SetModelsPoll or
// SetAttributePolls replaces.
type inService[T any] struct {
	set sync.Mutex // serializes replace
	cur atomic.Pointer[active[T]]
}

// active is a poll in service. Loops hold its read lock while they use
// it; replacing it closes replaced, then takes the write lock, so that
// replace returns once no loop uses it.
type active[T any] struct {
	poll     T
	replaced chan struct{}

	use     sync.RWMutex
	retired bool
}

// store puts the first poll in service.
func (m *inService[T]) store(p T) {
	m.cur.Store(&active[T]{poll: p, replaced: make(chan struct{})})
}

// acquire returns the poll in service, read-locked: release it when done.
func (m *inService[T]) acquire() *active[T] {
	for {
		a := m.cur.Load()
		a.use.RLock()
		if !a.retired {
			return a
		}
		// Replaced between the load and the lock.
		a.use.RUnlock()
	}
}

func (a *active[T]) release() { a.use.RUnlock() }

// replace puts next in service and waits until no loop uses the previous
// one.
func (m *inService[T]) replace(next T) {
	m.set.Lock()
	defer m.set.Unlock()
	old := m.cur.Swap(&active[T]{poll: next, replaced: make(chan struct{})})
	close(old.replaced)
	old.use.Lock()
	old.retired = true
	old.use.Unlock()
}
