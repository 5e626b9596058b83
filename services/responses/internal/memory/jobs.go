package memory

import (
	"container/heap"
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/hermod/hermod/services/responses/internal/store"
)

// memJob is a job and when it is next due and lets go. A job that will
// run (queued, or held under a lease) is in the store's due heap (index
// its place there; -1: not in it); a finished one is not, and no longer
// keeps its request and headers.
type memJob struct {
	store.Job
	due     time.Time
	expires time.Time
	events  [][]byte
	index   int
}

// dueJobs is the heap of jobs that will run, soonest due first.
type dueJobs []*memJob

func (d dueJobs) Len() int           { return len(d) }
func (d dueJobs) Less(i, j int) bool { return d[i].due.Before(d[j].due) }
func (d dueJobs) Swap(i, j int) {
	d[i], d[j] = d[j], d[i]
	d[i].index, d[j].index = i, j
}
func (d *dueJobs) Push(x any) {
	j := x.(*memJob)
	j.index = len(*d)
	*d = append(*d, j)
}
func (d *dueJobs) Pop() any {
	old := *d
	j := old[len(old)-1]
	old[len(old)-1] = nil
	j.index = -1
	*d = old[:len(old)-1]
	return j
}

// schedule puts j in the due heap at due; s.mu is held.
func (s *Store) schedule(j *memJob, due time.Time) {
	j.due = due
	if j.index >= 0 {
		heap.Fix(&s.due, j.index)
		return
	}
	heap.Push(&s.due, j)
}

// finish takes j out of the due heap and drops what only a run needs;
// s.mu is held.
func (s *Store) finish(j *memJob) {
	if j.index >= 0 {
		heap.Remove(&s.due, j.index)
	}
	j.Request, j.Headers, j.due = nil, nil, time.Time{}
}

// forget drops the job of id, if any; s.mu is held.
func (s *Store) forget(id string) {
	if j, ok := s.jobs[id]; ok {
		if j.index >= 0 {
			heap.Remove(&s.due, j.index)
		}
		delete(s.jobs, id)
	}
}

var _ store.Jobs = (*Store)(nil)

// Submit implements store.Jobs.
func (s *Store) Submit(ctx context.Context, r *store.Record, job *store.Job) error {
	if err := s.Put(ctx, r); err != nil {
		return err
	}
	now := s.opts.Now()
	j := &memJob{Job: *job, expires: now.Add(s.opts.TTL), index: -1}
	j.ID, j.Status, j.Token, j.UpdatedAt = r.ID, store.JobQueued, "", now
	j.Headers = maps.Clone(job.Headers)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forget(r.ID)
	s.jobs[r.ID] = j
	s.schedule(j, now)
	return nil
}

// job returns a live job; s.mu is held.
func (s *Store) job(id string, now time.Time) (*memJob, error) {
	j, ok := s.jobs[id]
	if ok && !now.Before(j.expires) {
		s.forget(id)
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

// Claim implements store.Jobs: the soonest due job of the heap, past
// any that expired.
func (s *Store) Claim(_ context.Context, token string, lease time.Duration) (*store.Job, error) {
	now := s.opts.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.due) > 0 {
		first := s.due[0]
		if !now.Before(first.expires) {
			s.forget(first.ID)
			continue
		}
		if now.Before(first.due) {
			return nil, nil
		}
		first.Status, first.Token, first.UpdatedAt = store.JobInProgress, token, now
		first.Attempts++
		s.schedule(first, now.Add(lease))
		return copyJob(first), nil
	}
	return nil, nil
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
	s.schedule(j, now.Add(lease))
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
	j.Status, j.Token, j.Error, j.UpdatedAt = store.JobQueued, "", reason, now
	s.schedule(j, now.Add(delay))
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
	j.Status, j.Token, j.Error, j.UpdatedAt = store.JobFailed, "", reason, now
	s.finish(j)
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
	j.Status, j.Token, j.Error, j.UpdatedAt = store.JobCompleted, "", "", now
	s.finish(j)
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
		j.Status, j.Token, j.UpdatedAt = store.JobCancelled, "", now
		s.finish(j)
	}
	return copyJob(j), nil
}
