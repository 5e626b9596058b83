package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hermod/hermod/services/responses/internal/store"
)

// Events checks a backend's event logs: only the run holding a job
// appends, an append lands once however often it is sent, a completion
// appends its last events in the same step, and a new submission or a
// deletion empties the log.
func Events(t *testing.T, s store.Backend) {
	ctx := context.Background()
	rec := &store.Record{ID: "resp_ev", CreatedAt: time.UnixMilli(1_700_000_000_000), Data: []byte("queued")}
	job := &store.Job{Request: []byte(`{"model":"m","stream":true}`)}
	if err := s.Submit(ctx, rec, job); err != nil {
		t.Fatal(err)
	}
	ev := func(i int) []byte { return []byte(fmt.Sprintf("event: e\ndata: {\"sequence_number\":%d}\n\n", i)) }
	if _, err := s.AppendEvents(ctx, rec.ID, "nobody", 0, [][]byte{ev(0)}); !errors.Is(err, store.ErrNotHeld) {
		t.Fatalf("append to a queued job: %v", err)
	}
	claim(t, s, "run1", rec.ID)
	wantLen := func(what string, n int, err error, want int) {
		t.Helper()
		if err != nil || n != want {
			t.Fatalf("%s: length %d, %v; want %d", what, n, err, want)
		}
	}
	n, err := s.AppendEvents(ctx, rec.ID, "run1", 0, [][]byte{ev(0), ev(1)})
	wantLen("first append", n, err, 2)
	n, err = s.AppendEvents(ctx, rec.ID, "run1", 0, [][]byte{ev(0), ev(1)})
	wantLen("the same append again", n, err, 2)
	n, err = s.AppendEvents(ctx, rec.ID, "run1", 1, [][]byte{ev(1), ev(2)})
	wantLen("an overlapping append", n, err, 3)
	if _, err := s.AppendEvents(ctx, rec.ID, "run1", 5, [][]byte{ev(5)}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("an append past the end: %v", err)
	}
	if _, err := s.AppendEvents(ctx, rec.ID, "run2", 3, [][]byte{ev(3)}); !errors.Is(err, store.ErrNotHeld) {
		t.Fatalf("an append by another run: %v", err)
	}
	wantEvents := func(what string, from, limit int, want ...int) {
		t.Helper()
		got, err := s.ReadEvents(ctx, rec.ID, from, limit)
		if err != nil || len(got) != len(want) {
			t.Fatalf("%s: %d events, %v; want %v", what, len(got), err, want)
		}
		for i, w := range want {
			if string(got[i]) != string(ev(w)) {
				t.Fatalf("%s: event %d is %q, want %q", what, i, got[i], ev(w))
			}
		}
	}
	wantEvents("a page", 0, 2, 0, 1)
	wantEvents("the rest", 2, 10, 2)
	wantEvents("past the end", 9, 10)
	if got, err := s.ReadEvents(ctx, "resp_unknown", 0, 10); err != nil || len(got) != 0 {
		t.Fatalf("the log of an unknown response: %v %v", got, err)
	}
	// a completion whose tail does not fit changes nothing
	done := &store.Record{ID: rec.ID, CreatedAt: rec.CreatedAt, Data: []byte("completed")}
	if err := s.Complete(ctx, done, "run1", &store.EventTail{From: 7, Events: [][]byte{ev(7)}}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a completion with a tail past the end: %v", err)
	}
	if j, _ := s.Job(ctx, rec.ID); j.Status != store.JobInProgress {
		t.Fatalf("a refused completion left the job %s", j.Status)
	}
	if got, _, _ := s.Get(ctx, rec.ID); string(got.Data) != "queued" {
		t.Fatalf("a refused completion stored %q", got.Data)
	}
	if err := s.Complete(ctx, done, "run1", &store.EventTail{From: 2, Events: [][]byte{ev(2), ev(3)}}); err != nil {
		t.Fatal(err)
	}
	wantEvents("after the completion", 0, 10, 0, 1, 2, 3)
	if _, err := s.AppendEvents(ctx, rec.ID, "run1", 4, [][]byte{ev(4)}); !errors.Is(err, store.ErrNotHeld) {
		t.Fatalf("an append after the completion: %v", err)
	}
	// submitted again: a new, empty log
	if err := s.Submit(ctx, rec, job); err != nil {
		t.Fatal(err)
	}
	wantEvents("after a new submission", 0, 10)
	claim(t, s, "run3", rec.ID)
	n, err = s.AppendEvents(ctx, rec.ID, "run3", 0, [][]byte{ev(0)})
	wantLen("the new run's append", n, err, 1)
	if err := s.Delete(ctx, rec.ID); err != nil {
		t.Fatal(err)
	}
	wantEvents("after the deletion", 0, 10)
}
