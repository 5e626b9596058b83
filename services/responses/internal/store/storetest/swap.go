package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hermod/hermod/services/responses/internal/store"
)

// Swap checks a backend's compare and swap: a swap against the revision
// read replaces the record, one against another revision or a missing
// record changes nothing, and read-modify-swap loops racing on one record
// lose none of their changes. maxEntryBytes is the backend's limit (0:
// none).
func Swap(t *testing.T, s store.Store, maxEntryBytes int) {
	ctx := context.Background()
	first := &store.Record{ID: "conv_swap", CreatedAt: time.UnixMilli(1_700_000_000_000), Data: []byte("v1"), Revision: store.NewRevision()}
	if err := s.Put(ctx, first); err != nil {
		t.Fatal(err)
	}
	got, _, err := s.Get(ctx, first.ID)
	if err != nil || got.Revision != first.Revision {
		t.Fatalf("get after put = %+v, %v; want revision %x", got, err, first.Revision)
	}
	second := *first
	second.Data, second.Revision = []byte("v2"), store.NewRevision()
	if err := s.Swap(ctx, &second, first.Revision+1); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("swap against another revision: %v", err)
	}
	if got, _, _ := s.Get(ctx, first.ID); string(got.Data) != "v1" {
		t.Fatalf("a refused swap changed the record to %q", got.Data)
	}
	if err := s.Swap(ctx, &second, first.Revision); err != nil {
		t.Fatalf("swap against the revision read: %v", err)
	}
	if got, _, err := s.Get(ctx, first.ID); err != nil || string(got.Data) != "v2" || got.Revision != second.Revision {
		t.Fatalf("after the swap: %+v, %v", got, err)
	}
	if err := s.Swap(ctx, &second, first.Revision); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a second swap against the old revision: %v", err)
	}
	missing := &store.Record{ID: "conv_none", Data: []byte("x"), Revision: store.NewRevision()}
	if err := s.Swap(ctx, missing, 0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("swap of a record that is not there: %v", err)
	}
	if _, _, err := s.Get(ctx, missing.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a refused swap created the record: %v", err)
	}
	if maxEntryBytes > 0 {
		big := second
		big.Data, big.Revision = bytes.Repeat([]byte("x"), maxEntryBytes+1), store.NewRevision()
		if err := s.Swap(ctx, &big, second.Revision); !errors.Is(err, store.ErrTooLarge) {
			t.Fatalf("swap of a record over the limit: %v", err)
		}
	}
	racingAppends(t, s)
	if err := s.Delete(ctx, first.ID); err != nil {
		t.Fatal(err)
	}
	third := second
	third.Revision = store.NewRevision()
	if err := s.Swap(ctx, &third, second.Revision); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("swap of a deleted record: %v", err)
	}
}

// racingAppends runs writers that each append their marks to one record
// by reading it and swapping, again on a conflict: every mark must be
// there at the end.
func racingAppends(t *testing.T, s store.Store) {
	ctx := context.Background()
	const writers, each = 4, 10
	if err := s.Put(ctx, &store.Record{ID: "conv_race", Revision: store.NewRevision(), Data: []byte{}}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if err := appendMark(ctx, s, fmt.Sprintf("<%d.%d>", w, i)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	got, _, err := s.Get(ctx, "conv_race")
	if err != nil {
		t.Fatal(err)
	}
	for w := range writers {
		for i := range each {
			if mark := fmt.Sprintf("<%d.%d>", w, i); !strings.Contains(string(got.Data), mark) {
				t.Errorf("mark %s lost: %q", mark, got.Data)
			}
		}
	}
}

func appendMark(ctx context.Context, s store.Store, mark string) error {
	for range 1000 {
		r, _, err := s.Get(ctx, "conv_race")
		if err != nil {
			return err
		}
		want := r.Revision
		r.Data, r.Revision = append(r.Data, mark...), store.NewRevision()
		err = s.Swap(ctx, r, want)
		if !errors.Is(err, store.ErrConflict) {
			return err
		}
	}
	return fmt.Errorf("append %s: no swap won in 1000 tries", mark)
}
