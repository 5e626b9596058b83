package memory

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/hermod/hermod/services/responses/internal/store"
)

// memJob is a job and when it is next due (zero: never) and lets go.
type memJob struct {
	store.Job
	due     time.Time
	expires time.Time
	events  [][]byte
}

var _ store.Jobs = (*Store)(nil)

// Submit implements store.Jobs.
func (s *Store) Submit(ctx context.Context, r *store.Record, job *store.Job) error {
	if err := s.Put(ctx, r); err != nil {
		return err
	}
	now := s.opts.Now()
	j := &memJob{Job: *job, due: now, expires: now.Add(s.opts.TTL)}
	j.ID, j.Status, j.Token, j.UpdatedAt = r.ID, store.JobQueued, "", now
	j.Headers = maps.Clone(job.Headers)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.jobs[r.ID] = j
	return nil
}

// job returns a live job; s.mu is held.
func (s *Store) job(id string, now time.Time) (*memJob, error) {
	j, ok := s.jobs[id]
	if ok && !now.Before(j.expires) {
		delete(s.jobs, id)
		ok = false
	}
	if !ok {
		return nil, fmt.Errorf("%w: background response %s", store.ErrNotFound, id)
	}
	return j, nil
}

// held returns the job the run token holds; s.mu is held.
func (s *Store) held(id, token string, now time.Time) (*memJob, error) {
	j, err := s.job(id, now)
	if err != nil {
		return nil, err
	}
	if j.Status != store.JobInProgress || j.Token != token || token == "" {
		return nil, fmt.Errorf("%w: %s is %s", store.ErrNotHeld, id, j.Status)
	}
	return j, nil
}

func copyJob(j *memJob) *store.Job {
	c := j.Job
	c.Headers = maps.Clone(j.Headers)
	return &c
}

// Job implements store.Jobs.
func (s *Store) Job(_ context.Context, id string) (*store.Job, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, err := s.job(id, s.opts.Now())
	if err != nil {
		return nil, err
	}
	return copyJob(j), nil
}

// Claim implements store.Jobs.
func (s *Store) Claim(_ context.Context, token string, lease time.Duration) (*store.Job, error) {
	now := s.opts.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	var first *memJob
	for id, j := range s.jobs {
		if !now.Before(j.expires) {
			delete(s.jobs, id)
			continue
		}
		if !j.due.IsZero() && !now.Before(j.due) && (first == nil || j.due.Before(first.due)) {
			first = j
		}
	}
	if first == nil {
		return nil, nil
	}
	first.Status, first.Token, first.UpdatedAt, first.due = store.JobInProgress, token, now, now.Add(lease)
	first.Attempts++
	return copyJob(first), nil
}

// Extend implements store.Jobs.
func (s *Store) Extend(_ context.Context, id, token string, lease time.Duration) error {
	now := s.opts.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	j, err := s.held(id, token, now)
	if err != nil {
		return err
	}
	j.due = now.Add(lease)
	return nil
}

// Retry implements store.Jobs.
func (s *Store) Retry(_ context.Context, id, token string, delay time.Duration, reason string) error {
	now := s.opts.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	j, err := s.held(id, token, now)
	if err != nil {
		return err
	}
	j.Status, j.Token, j.Error, j.UpdatedAt, j.due = store.JobQueued, "", reason, now, now.Add(delay)
	return nil
}

// Fail implements store.Jobs.
func (s *Store) Fail(_ context.Context, id, token, reason string) error {
	now := s.opts.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	j, err := s.held(id, token, now)
	if err != nil {
		return err
	}
	j.Status, j.Token, j.Error, j.UpdatedAt, j.due = store.JobFailed, "", reason, now, time.Time{}
	return nil
}

// Complete implements store.Jobs.
func (s *Store) Complete(_ context.Context, r *store.Record, token string, tail *store.EventTail) error {
	if err := store.CheckPut(r, s.opts.MaxEntryBytes); err != nil {
		return err
	}
	e := s.newEntry(r)
	now := s.opts.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	j, err := s.held(r.ID, token, now)
	if err != nil {
		return err
	}
	if tail != nil {
		add, err := store.CheckTail(len(j.events), tail.From, tail.Events)
		if err != nil {
			return err
		}
		j.events = appendCopies(j.events, add)
	}
	j.Status, j.Token, j.Error, j.UpdatedAt, j.due = store.JobCompleted, "", "", now, time.Time{}
	s.put(e)
	return nil
}

var _ store.Events = (*Store)(nil)

// AppendEvents implements store.Events.
func (s *Store) AppendEvents(_ context.Context, id, token string, from int, events [][]byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, err := s.held(id, token, s.opts.Now())
	if err != nil {
		return 0, err
	}
	add, err := store.CheckTail(len(j.events), from, events)
	if err != nil {
		return 0, err
	}
	j.events = appendCopies(j.events, add)
	return len(j.events), nil
}

// ReadEvents implements store.Events.
func (s *Store) ReadEvents(_ context.Context, id string, from, limit int) ([][]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, err := s.job(id, s.opts.Now())
	if err != nil || from < 0 || from >= len(j.events) {
		return nil, nil // an unknown response has an empty log
	}
	page := j.events[from:min(len(j.events), from+limit)]
	return appendCopies(nil, page), nil
}

func appendCopies(dst, src [][]byte) [][]byte {
	for _, b := range src {
		dst = append(dst, append([]byte(nil), b...))
	}
	return dst
}

// Cancel implements store.Jobs.
func (s *Store) Cancel(_ context.Context, id string) (*store.Job, error) {
	now := s.opts.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	j, err := s.job(id, now)
	if err != nil {
		return nil, err
	}
	if !j.Status.Final() {
		j.Status, j.Token, j.UpdatedAt, j.due = store.JobCancelled, "", now, time.Time{}
	}
	return copyJob(j), nil
}
