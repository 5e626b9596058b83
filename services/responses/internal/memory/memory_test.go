package memory

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hermod/hermod/services/responses/internal/store"
	"github.com/hermod/hermod/services/responses/internal/store/storetest"
)

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func TestTTLMaxEntriesAndMaxEntryBytes(t *testing.T) {
	c := &clock{now: time.Unix(1000, 0)}
	s := New(Options{TTL: time.Minute, MaxEntries: 3, MaxEntryBytes: 32, Now: c.Now})
	ctx := context.Background()
	for i := range 3 {
		if err := s.Put(ctx, &store.Record{ID: fmt.Sprint("r", i), Data: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	// r0 used: r1 is the least recently used and goes first
	if _, tier, err := s.Get(ctx, "r0"); err != nil || tier != store.TierMemory {
		t.Fatal(err)
	}
	_ = s.Put(ctx, &store.Record{ID: "r3", Data: []byte("x")})
	if _, _, err := s.Get(ctx, "r1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("r1 not evicted: %v", err)
	}
	if s.Len() != 3 || s.Evicted() != 1 {
		t.Fatalf("len %d evicted %d", s.Len(), s.Evicted())
	}
	// maxEntryBytes: refused, nothing stored
	if err := s.Put(ctx, &store.Record{ID: "big", Data: []byte(strings.Repeat("x", 40))}); !errors.Is(err, store.ErrTooLarge) {
		t.Fatalf("large: %v", err)
	}
	if _, _, err := s.Get(ctx, "big"); !errors.Is(err, store.ErrNotFound) {
		t.Fatal("large entry stored")
	}
	// ttl
	c.Add(59 * time.Second)
	if _, _, err := s.Get(ctx, "r3"); err != nil {
		t.Fatal(err)
	}
	c.Add(time.Second)
	if _, _, err := s.Get(ctx, "r3"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("expired: %v", err)
	}
	if err := s.Delete(ctx, "r0"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("delete expired: %v", err)
	}
}

func TestCopiesAndDelete(t *testing.T) {
	s := New(Options{TTL: time.Hour})
	ctx := context.Background()
	data := []byte("abc")
	_ = s.Put(ctx, &store.Record{ID: "a", Data: data})
	data[0] = 'X'
	got, _, _ := s.Get(ctx, "a")
	if string(got.Data) != "abc" {
		t.Fatalf("the store kept the caller's slice: %q", got.Data)
	}
	got.Data[0] = 'Y'
	again, _, _ := s.Get(ctx, "a")
	if string(again.Data) != "abc" {
		t.Fatal("the store handed out its slice")
	}
	if err := s.Delete(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "a"); !errors.Is(err, store.ErrNotFound) {
		t.Fatal(err)
	}
	if err := s.Put(ctx, &store.Record{}); !errors.Is(err, store.ErrNoID) {
		t.Fatal(err)
	}
}

func TestGetChain(t *testing.T) {
	s := New(Options{TTL: time.Hour})
	ctx := context.Background()
	_ = s.Put(ctx, &store.Record{ID: "a"})
	_ = s.Put(ctx, &store.Record{ID: "b", PreviousID: "a"})
	_ = s.Put(ctx, &store.Record{ID: "c", PreviousID: "b"})
	chain, err := store.GetChain(ctx, s, "c", 3)
	if err != nil || len(chain) != 3 || chain[0].ID != "a" || chain[2].ID != "c" {
		t.Fatalf("%v %v", chain, err)
	}
	var tooLong *store.ChainTooLongError
	if _, err := store.GetChain(ctx, s, "c", 2); !errors.As(err, &tooLong) || tooLong.Limit != 2 {
		t.Fatalf("limit: %v", err)
	}
	_ = s.Delete(ctx, "a")
	if _, err := store.GetChain(ctx, s, "c", 10); !errors.Is(err, store.ErrNotFound) || !strings.Contains(err.Error(), "a, which b continues") {
		t.Fatalf("broken chain: %v", err)
	}
	_ = s.Put(ctx, &store.Record{ID: "x", PreviousID: "y"})
	_ = s.Put(ctx, &store.Record{ID: "y", PreviousID: "x"})
	if _, err := store.GetChain(ctx, s, "x", 10); !errors.As(err, &tooLong) {
		t.Fatalf("cycle: %v", err)
	}
}

func TestJobs(t *testing.T) {
	c := &clock{now: time.Unix(1000, 0)}
	storetest.Jobs(t, New(Options{TTL: time.Hour, Now: c.Now}), c.Add)
}

func TestJobsExpireWithTheirRecords(t *testing.T) {
	c := &clock{now: time.Unix(1000, 0)}
	s := New(Options{TTL: time.Minute, Now: c.Now})
	ctx := context.Background()
	if err := s.Submit(ctx, &store.Record{ID: "resp_x", Data: []byte("q")}, &store.Job{}); err != nil {
		t.Fatal(err)
	}
	c.Add(2 * time.Minute)
	if j, err := s.Claim(ctx, "run", time.Minute); err != nil || j != nil {
		t.Fatalf("claimed an expired job: %+v, %v", j, err)
	}
	if _, err := s.Job(ctx, "resp_x"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("expired job: %v", err)
	}
}

func TestSwap(t *testing.T) {
	storetest.Swap(t, New(Options{TTL: time.Hour, MaxEntryBytes: 1 << 10}), 1<<10)
}

func TestEvents(t *testing.T) {
	storetest.Events(t, New(Options{TTL: time.Hour}))
}

// Jobs are bounded as records are, a finished job keeps no request or
// headers, and Claim takes the soonest due job among many without
// scanning them all.
func TestJobsBoundedAndFinishedOnesLight(t *testing.T) {
	c := &clock{now: time.Unix(1_700_000_000, 0)}
	s := New(Options{TTL: time.Hour, MaxEntries: 100, Now: c.Now})
	ctx := context.Background()
	for i := range 1000 {
		rec := &store.Record{ID: fmt.Sprintf("resp_%04d", i), Data: []byte("q")}
		if err := s.Submit(ctx, rec, &store.Job{Request: []byte(`{"big":"request"}`), Headers: map[string]string{"Authorization": "Bearer k"}}); err != nil {
			t.Fatal(err)
		}
		c.Add(time.Millisecond)
	}
	s.mu.Lock()
	jobs, due := len(s.jobs), len(s.due)
	s.mu.Unlock()
	if jobs != 100 || due != 100 {
		t.Fatalf("%d jobs, %d due after 1000 submissions with maxEntries 100", jobs, due)
	}
	j, err := s.Claim(ctx, "run", time.Minute)
	if err != nil || j == nil || j.ID != "resp_0900" {
		t.Fatalf("claim: %+v %v; want the oldest left, resp_0900", j, err)
	}
	if err := s.Complete(ctx, &store.Record{ID: j.ID, Data: []byte("done")}, "run", nil); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	done := s.jobs[j.ID]
	light, due := done.Request == nil && done.Headers == nil && done.index == -1, len(s.due)
	s.mu.Unlock()
	if !light || due != 99 {
		t.Fatalf("a completed job keeps its request (%v) or its place in the heap (%d due)", !light, due)
	}
	if next, _ := s.Claim(ctx, "run2", time.Minute); next == nil || next.ID != "resp_0901" {
		t.Fatalf("next claim: %+v", next)
	}
}
