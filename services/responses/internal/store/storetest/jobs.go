// Package storetest holds the behaviour every responses backend shares,
// as tests each backend runs against itself.
package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hermod/hermod/services/responses/internal/store"
)

// Jobs checks a backend's background jobs. advance moves the backend's
// clock forward.
func Jobs(t *testing.T, s store.Backend, advance func(time.Duration)) {
	ctx := context.Background()
	rec := func(id, data string) *store.Record {
		return &store.Record{ID: id, CreatedAt: time.UnixMilli(1_700_000_000_000), Data: []byte(data)}
	}
	if j, err := s.Claim(ctx, "t0", time.Minute); err != nil || j != nil {
		t.Fatalf("claim on an empty queue = %+v, %v", j, err)
	}
	if _, err := s.Job(ctx, "resp_none"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown job: %v", err)
	}
	for _, id := range []string{"resp_a", "resp_b"} {
		if err := s.Submit(ctx, rec(id, "queued"), &store.Job{Request: []byte(`{"model":"m"}`), Headers: map[string]string{"Authorization": "Bearer k"}}); err != nil {
			t.Fatal(err)
		}
		advance(time.Millisecond)
	}
	if r, _, err := s.Get(ctx, "resp_a"); err != nil || string(r.Data) != "queued" {
		t.Fatalf("submitted record = %v, %v", r, err)
	}
	a := claim(t, s, "run1", "resp_a")
	if a.Attempts != 1 || string(a.Request) != `{"model":"m"}` || a.Headers["Authorization"] != "Bearer k" {
		t.Fatalf("claimed %+v", a)
	}
	b := claim(t, s, "run2", "resp_b")
	if j, err := s.Claim(ctx, "run3", time.Minute); err != nil || j != nil {
		t.Fatalf("claim with both held = %+v, %v", j, err)
	}
	checkRetryAndLease(t, s, advance)
	// b: failed; a finished job stays as it is when cancelled.
	if err := s.Fail(ctx, b.ID, "run2", "the gateway refused it"); err != nil {
		t.Fatal(err)
	}
	if j, err := s.Cancel(ctx, b.ID); err != nil || j.Status != store.JobFailed || j.Error != "the gateway refused it" {
		t.Fatalf("cancel a failed job = %+v, %v", j, err)
	}
	// a finished job keeps no request or credentials
	if j, err := s.Job(ctx, b.ID); err != nil || len(j.Request) != 0 || len(j.Headers) != 0 {
		t.Fatalf("a failed job = %+v, %v; want no request or headers", j, err)
	}
	checkCancelAndComplete(t, s, rec)
}

func claim(t *testing.T, s store.Backend, token, want string) *store.Job {
	t.Helper()
	j, err := s.Claim(context.Background(), token, time.Minute)
	if err != nil || j == nil || j.ID != want || j.Status != store.JobInProgress || j.Token != token {
		t.Fatalf("claim = %+v, %v; want %s", j, err, want)
	}
	return j
}

// checkRetryAndLease: resp_a is held by run1.
func checkRetryAndLease(t *testing.T, s store.Backend, advance func(time.Duration)) {
	ctx := context.Background()
	if err := s.Retry(ctx, "resp_a", "run9", time.Second, "x"); !errors.Is(err, store.ErrNotHeld) {
		t.Fatalf("retry by a run that does not hold it: %v", err)
	}
	if err := s.Retry(ctx, "resp_a", "run1", 10*time.Second, "gateway down"); err != nil {
		t.Fatal(err)
	}
	if j, _ := s.Job(ctx, "resp_a"); j.Status != store.JobQueued || j.Error != "gateway down" {
		t.Fatalf("retried job = %+v", j)
	}
	if j, _ := s.Claim(ctx, "run3", time.Minute); j != nil {
		t.Fatalf("claimed %s before its retry delay", j.ID)
	}
	advance(11 * time.Second)
	a := claim(t, s, "run3", "resp_a")
	if a.Attempts != 2 {
		t.Fatalf("attempts = %d, want 2", a.Attempts)
	}
	// run3's lease runs out: run4 takes the job and run3 can change nothing.
	if err := s.Extend(ctx, "resp_a", "run3", 20*time.Second); err != nil {
		t.Fatal(err)
	}
	advance(15 * time.Second)
	if j, _ := s.Claim(ctx, "run4", time.Minute); j != nil {
		t.Fatalf("claimed %s within its extended lease", j.ID)
	}
	advance(10 * time.Second)
	claim(t, s, "run4", "resp_a")
	if err := s.Extend(ctx, "resp_a", "run3", time.Minute); !errors.Is(err, store.ErrNotHeld) {
		t.Fatalf("extend by the run that lost it: %v", err)
	}
	if err := s.Complete(ctx, &store.Record{ID: "resp_a", Data: []byte("late")}, "run3", nil); !errors.Is(err, store.ErrNotHeld) {
		t.Fatalf("complete by the run that lost it: %v", err)
	}
}

// checkCancelAndComplete: resp_a is held by run4.
func checkCancelAndComplete(t *testing.T, s store.Backend, rec func(id, data string) *store.Record) {
	ctx := context.Background()
	if j, err := s.Cancel(ctx, "resp_a"); err != nil || j.Status != store.JobCancelled {
		t.Fatalf("cancel = %+v, %v", j, err)
	}
	if err := s.Complete(ctx, rec("resp_a", "done"), "run4", nil); !errors.Is(err, store.ErrNotHeld) {
		t.Fatalf("complete after cancel: %v", err)
	}
	if r, _, _ := s.Get(ctx, "resp_a"); string(r.Data) != "queued" {
		t.Fatalf("a cancelled job's record was overwritten: %q", r.Data)
	}
	if err := s.Submit(ctx, rec("resp_c", "queued"), &store.Job{Request: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	c := claim(t, s, "run5", "resp_c")
	if err := s.Complete(ctx, rec("resp_c", "done"), c.Token, nil); err != nil {
		t.Fatal(err)
	}
	if r, _, _ := s.Get(ctx, "resp_c"); string(r.Data) != "done" {
		t.Fatalf("completed record = %q", r.Data)
	}
	if j, _ := s.Cancel(ctx, "resp_c"); j.Status != store.JobCompleted {
		t.Fatalf("cancel a completed job = %+v", j)
	}
	if _, err := s.Cancel(ctx, "resp_none"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("cancel an unknown job: %v", err)
	}
	if j, _ := s.Claim(ctx, "run6", time.Minute); j != nil {
		t.Fatalf("claimed a finished job %s", j.ID)
	}
}
