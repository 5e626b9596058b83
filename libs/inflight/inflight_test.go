package inflight_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valkey-io/valkey-go"
	"go.uber.org/goleak"

	"github.com/hermod/hermod/libs/inflight"
	"github.com/hermod/hermod/testkit/redistest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func client(t testing.TB, srv *redistest.Server) valkey.Client { return srv.Client(t) }

func counts(t testing.TB, s *inflight.Store) map[string]int64 {
	t.Helper()
	m, err := s.Counts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestPickTakesTheLeastLoadedCandidate(t *testing.T) {
	srv := redistest.Start(t)
	s := inflight.New(client(t, srv), "p", 0)
	ctx := context.Background()
	if _, err := s.Sync(ctx, []string{"a", "b", "c"}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for i := range 6 {
		ep, _, err := s.Pick(ctx, fmt.Sprint("r", i), []string{"a", "b", "c"}, 0)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ep)
	}
	if fmt.Sprint(got) != "[a b c a b c]" {
		t.Fatalf("picks %v: least loaded first, earlier candidates on ties", got)
	}
	// candidates restricted to what the filters left
	if ep, n, _ := s.Pick(ctx, "r6", []string{"c"}, 0); ep != "c" || n != 3 {
		t.Fatalf("only c: %s %d", ep, n)
	}
	// a retried pick keeps its lease
	if ep, n, _ := s.Pick(ctx, "r6", []string{"a", "c"}, 0); ep != "c" || n != 3 {
		t.Fatalf("retried pick: %s %d", ep, n)
	}
	if _, _, err := s.Pick(ctx, "r7", []string{"c"}, 3); !errors.Is(err, inflight.ErrFull) {
		t.Fatalf("c at its limit: %v", err)
	}
	// releases count once; unknown ids do nothing
	if n, _ := s.Release(ctx, "r6", "r6", "nobody"); n != 1 {
		t.Fatalf("released %d leases", n)
	}
	if m := counts(t, s); m["c"] != 2 || m["a"] != 2 || m["b"] != 2 {
		t.Fatalf("counts %v", m)
	}
	// sync: new at 0, removed gone, the rest kept; a removed endpoint's
	// late release does not bring it back
	if n, _ := s.Sync(ctx, []string{"a", "b", "d"}); n != 1 {
		t.Fatalf("removed %d", n)
	}
	if _, err := s.Release(ctx, "r2", "r5"); err != nil {
		t.Fatal(err)
	}
	if m := counts(t, s); fmt.Sprint(m) != "map[a:2 b:2 d:0]" {
		t.Fatalf("after sync %v", m)
	}
}

// 32 goroutines over 4 clients pick and release concurrently: no
// endpoint ever holds more than the limit, and everything returns to zero.
func TestConcurrentPicksNeverExceedTheLimit(t *testing.T) {
	srv := redistest.Start(t)
	var stores []*inflight.Store
	for range 4 {
		stores = append(stores, inflight.New(client(t, srv), "p", 0))
	}
	eps := []string{"e0", "e1", "e2", "e3", "e4", "e5", "e6", "e7"}
	const limit = 3
	ctx := context.Background()
	var live [8]atomic.Int32
	var over, full atomic.Int32
	var wg sync.WaitGroup
	for g := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := stores[g%4]
			for i := range 60 {
				id := fmt.Sprintf("g%d-%d", g, i)
				ep, _, err := s.Pick(ctx, id, eps, limit)
				if errors.Is(err, inflight.ErrFull) {
					full.Add(1)
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				k := int(ep[1] - '0')
				if live[k].Add(1) > limit {
					over.Add(1)
				}
				time.Sleep(time.Duration(i%3) * time.Millisecond)
				live[k].Add(-1)
				if i%7 == 0 {
					// a completion reported twice (by RPC, and by stream to
					// another replica): it counts once
					if _, err := stores[(g+1)%4].Release(ctx, id); err != nil {
						t.Error(err)
						return
					}
				}
				if _, err := s.Release(ctx, id); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if over.Load() > 0 {
		t.Fatalf("%d picks went over the limit of %d", over.Load(), limit)
	}
	t.Logf("%d picks found every endpoint full", full.Load())
	for ep, n := range counts(t, stores[0]) {
		if n != 0 {
			t.Fatalf("%s holds %d after every request ended", ep, n)
		}
	}
	if leases, _ := stores[0].Leases(ctx); leases != 0 {
		t.Fatalf("%d leases left", leases)
	}
}

// A gateway that dies with requests in flight never reports them: their
// leases expire and Repair gives the counts back.
func TestExpiredLeasesAreRepaired(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	short := inflight.New(client(t, srv), "p", 20*time.Millisecond)
	long := inflight.New(client(t, srv), "p", time.Hour)
	for i := range 3 {
		if _, _, err := short.Pick(ctx, fmt.Sprint("dead", i), []string{"a", "b"}, 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := long.Pick(ctx, "alive", []string{"a", "b"}, 0); err != nil {
		t.Fatal(err)
	}
	if n, _ := short.Repair(ctx); n != 0 {
		t.Fatalf("repaired %d leases before they expired", n)
	}
	time.Sleep(40 * time.Millisecond)
	if n, err := short.Repair(ctx); err != nil || n != 3 {
		t.Fatalf("repaired %d, %v: want the 3 expired", n, err)
	}
	m := counts(t, long)
	if m["a"]+m["b"] != 1 {
		t.Fatalf("counts %v: only the live request should count", m)
	}
}

// SCRIPT FLUSH mid-run: the next calls send the scripts again.
func TestScriptFlushRecovers(t *testing.T) {
	srv := redistest.Start(t)
	c := client(t, srv)
	s := inflight.New(c, "p", 0)
	ctx := context.Background()
	for i := range 20 {
		if i == 10 {
			if err := c.Do(ctx, c.B().ScriptFlush().Build()).Error(); err != nil {
				t.Fatal(err)
			}
		}
		id := fmt.Sprint("r", i)
		if _, _, err := s.Pick(ctx, id, []string{"a", "b"}, 0); err != nil {
			t.Fatalf("pick %d: %v", i, err)
		}
		if _, err := s.Release(ctx, id); err != nil {
			t.Fatalf("release %d: %v", i, err)
		}
	}
	if m := counts(t, s); m["a"] != 0 || m["b"] != 0 {
		t.Fatalf("counts %v", m)
	}
}

// BenchmarkPickRelease: the atomic pick over 8 candidates and its release
// on a real server over loopback; reports the pick's round-trip p50/p99.
func BenchmarkPickRelease(b *testing.B) {
	srv := redistest.Start(b)
	s := inflight.New(client(b, srv), "p", 0)
	ctx := context.Background()
	eps := []string{"e0", "e1", "e2", "e3", "e4", "e5", "e6", "e7"}
	var rtts []time.Duration
	i := 0
	for b.Loop() {
		id := fmt.Sprint("r", i)
		i++
		start := time.Now()
		if _, _, err := s.Pick(ctx, id, eps, 0); err != nil {
			b.Fatal(err)
		}
		rtts = append(rtts, time.Since(start))
		if _, err := s.Release(ctx, id); err != nil {
			b.Fatal(err)
		}
	}
	slices.Sort(rtts)
	b.ReportMetric(float64(rtts[len(rtts)/2].Microseconds()), "pick-p50-µs")
	b.ReportMetric(float64(rtts[len(rtts)*99/100].Microseconds()), "pick-p99-µs")
}
