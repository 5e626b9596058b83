package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// JobStatus is where a background response's run stands.
type JobStatus string

// The statuses, as the Responses API names them.
const (
	JobQueued     JobStatus = "queued"
	JobInProgress JobStatus = "in_progress"
	JobCompleted  JobStatus = "completed"
	JobFailed     JobStatus = "failed"
	JobCancelled  JobStatus = "cancelled"
)

// Final reports whether no run will change the status again.
func (s JobStatus) Final() bool {
	return s == JobCompleted || s == JobFailed || s == JobCancelled
}

// ErrNotHeld is the answer to a run that no longer holds its job: it was
// cancelled, or its lease ran out and another run took it.
var ErrNotHeld = errors.New("the run no longer holds the background response")

// Job is a background response's run state and what a run sends.
type Job struct {
	ID        string
	Status    JobStatus
	Error     string
	Attempts  int
	UpdatedAt time.Time
	// Request and Headers are what a run sends to the gateway.
	Request []byte
	Headers map[string]string
	// Token identifies the run holding the job (in_progress only).
	Token string
}

// Jobs is the queue of background responses a backend keeps beside its
// records. A job is due when queued (after its retry delay) or when the
// lease of the run holding it ran out; Claim hands each due job to one
// run. Every change names the run (its token), so a run that lost its job
// changes nothing.
type Jobs interface {
	// Submit stores r as Put does and queues job (its id is r's), in one
	// step.
	Submit(ctx context.Context, r *Record, job *Job) error
	// Job returns a job's state (ErrNotFound: no such job).
	Job(ctx context.Context, id string) (*Job, error)
	// Claim takes the longest-due job, if any: it becomes in_progress
	// under a new token until now+lease. It returns nil when none is due.
	Claim(ctx context.Context, token string, lease time.Duration) (*Job, error)
	// Extend renews a held job's lease.
	Extend(ctx context.Context, id, token string, lease time.Duration) error
	// Retry puts a held job back in the queue, due after delay.
	Retry(ctx context.Context, id, token string, delay time.Duration, reason string) error
	// Fail ends a held job as failed.
	Fail(ctx context.Context, id, token, reason string) error
	// Complete stores r, the outcome of the run holding r's job, appends
	// tail (if any) to its event log as AppendEvents does, and completes
	// the job, in one step.
	Complete(ctx context.Context, r *Record, token string, tail *EventTail) error
	// Cancel cancels a queued or running job and returns its state
	// afterwards; a finished job is returned as it is.
	Cancel(ctx context.Context, id string) (*Job, error)
}

// EventTail is events to append to a log at index From.
type EventTail struct {
	From   int
	Events [][]byte
}

// MaxEvents bounds a response's event log, MaxEventBytes each event (the
// last holds the whole response, itself within maxEntryBytes).
const (
	MaxEvents     = 1 << 17
	MaxEventBytes = 2 << 20
)

// Events is the event log of each background response, beside its job:
// what a live stream of the response sends, appended by the run holding
// the job as the run goes, read by every client streaming it. A log lives
// as long as its job; deleting the response deletes it.
type Events interface {
	// AppendEvents places events in id's log at index from, skipping the
	// ones the log holds already (a retried append lands once), and
	// returns the log's length. ErrNotHeld unless token holds the job;
	// ErrConflict when the log is shorter than from; ErrTooLarge past
	// MaxEvents.
	AppendEvents(ctx context.Context, id, token string, from int, events [][]byte) (int, error)
	// ReadEvents returns up to limit events of id's log from index from
	// (none for an unknown id).
	ReadEvents(ctx context.Context, id string, from, limit int) ([][]byte, error)
}

// CheckTail validates an append of events at index from to a log of
// length n: the events still to add, or an error.
func CheckTail(n, from int, events [][]byte) ([][]byte, error) {
	switch {
	case from < 0:
		return nil, fmt.Errorf("%w: index %d", ErrConflict, from)
	case from > n:
		return nil, fmt.Errorf("%w: the log holds %d events, the append starts at %d", ErrConflict, n, from)
	case from+len(events) > MaxEvents:
		return nil, fmt.Errorf("%w: more than %d events", ErrTooLarge, MaxEvents)
	}
	if err := CheckEvents(from, events); err != nil {
		return nil, err
	}
	if skip := n - from; skip < len(events) {
		return events[skip:], nil
	}
	return nil, nil
}

// CheckEvents bounds each event of an append at index from.
func CheckEvents(from int, events [][]byte) error {
	for i, e := range events {
		if len(e) > MaxEventBytes {
			return fmt.Errorf("%w: event %d is %d bytes, more than %d", ErrTooLarge, from+i, len(e), MaxEventBytes)
		}
	}
	return nil
}

// Backend is a store with background jobs: what the service serves.
type Backend interface {
	Store
	Jobs
	Events
}
