// Package memory is the in-memory responses backend (inMemoryConfig): a
// map bounded by maxEntries with least-recently-used eviction, records
// expiring ttl after they were stored, and a per-record size limit. It is
// one replica's memory: replicas of the service do not share it.
package memory

import (
	"container/list"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/hermod/hermod/services/responses/internal/store"
)

// Options bound the store.
type Options struct {
	TTL           time.Duration
	MaxEntries    int
	MaxEntryBytes int
	// Now is the clock (tests replace it); nil is time.Now.
	Now func() time.Time
}

// Store is the in-memory backend.
type Store struct {
	opts Options

	mu      sync.Mutex
	entries map[string]*list.Element // of *entry
	lru     list.List                // front: most recently used
	evicted uint64
	jobs    map[string]*memJob
	due     dueJobs
}

type entry struct {
	rec     store.Record
	expires time.Time
}

// New returns an empty store.
func New(o Options) *Store {
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Store{opts: o, entries: map[string]*list.Element{}, jobs: map[string]*memJob{}}
}

// Put implements store.Store.
func (s *Store) Put(_ context.Context, r *store.Record) error {
	if err := store.CheckPut(r, s.opts.MaxEntryBytes); err != nil {
		return err
	}
	e := s.newEntry(r)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.put(e)
	return nil
}

func (s *Store) newEntry(r *store.Record) *entry {
	e := &entry{rec: *r, expires: s.opts.Now().Add(s.opts.TTL)}
	e.rec.Data = append([]byte(nil), r.Data...)
	return e
}

// put stores e; s.mu is held.
func (s *Store) put(e *entry) {
	if el, ok := s.entries[e.rec.ID]; ok {
		el.Value = e
		s.lru.MoveToFront(el)
		return
	}
	s.entries[e.rec.ID] = s.lru.PushFront(e)
	for s.opts.MaxEntries > 0 && s.lru.Len() > s.opts.MaxEntries {
		s.remove(s.lru.Back())
		s.evicted++
	}
}

// Swap implements store.Store.
func (s *Store) Swap(_ context.Context, r *store.Record, want uint64) error {
	if err := store.CheckPut(r, s.opts.MaxEntryBytes); err != nil {
		return err
	}
	e := s.newEntry(r)
	s.mu.Lock()
	defer s.mu.Unlock()
	el, ok := s.entries[r.ID]
	if !ok || !s.opts.Now().Before(el.Value.(*entry).expires) {
		return fmt.Errorf("%w: %s", store.ErrNotFound, r.ID)
	}
	if got := el.Value.(*entry).rec.Revision; got != want {
		return fmt.Errorf("%w: %s is at another revision", store.ErrConflict, r.ID)
	}
	el.Value = e
	s.lru.MoveToFront(el)
	return nil
}

// Get implements store.Store.
func (s *Store) Get(_ context.Context, id string) (*store.Record, store.Tier, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	el, ok := s.entries[id]
	if !ok {
		return nil, "", fmt.Errorf("%w: %s", store.ErrNotFound, id)
	}
	e := el.Value.(*entry)
	if !s.opts.Now().Before(e.expires) {
		s.remove(el)
		return nil, "", fmt.Errorf("%w: %s (expired)", store.ErrNotFound, id)
	}
	s.lru.MoveToFront(el)
	r := e.rec
	r.Data = append([]byte(nil), e.rec.Data...)
	return &r, store.TierMemory, nil
}

// Delete implements store.Store.
func (s *Store) Delete(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	el, ok := s.entries[id]
	if !ok {
		return fmt.Errorf("%w: %s", store.ErrNotFound, id)
	}
	live := s.opts.Now().Before(el.Value.(*entry).expires)
	s.remove(el)
	if !live {
		return fmt.Errorf("%w: %s (expired)", store.ErrNotFound, id)
	}
	return nil
}

// Len is how many records the store holds (expired ones included until
// they are read or evicted).
func (s *Store) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lru.Len()
}

// Evicted is how many records were evicted for room.
func (s *Store) Evicted() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.evicted
}

// Close implements store.Store.
func (s *Store) Close() error { return nil }

// remove drops a record and its job (and the job's event log), so that
// jobs are bounded by maxEntries as records are; s.mu is held.
func (s *Store) remove(el *list.Element) {
	id := el.Value.(*entry).rec.ID
	delete(s.entries, id)
	s.lru.Remove(el)
	s.forget(id)
}
