package coord

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	registryv1 "github.com/hermod/hermod/libs/api/hermod/registry/v1"
	"github.com/hermod/hermod/testkit/coordtest"
)

// checkConsistent checks that a snapshot is exactly what etcd held at the
// snapshot's revision.
func checkConsistent(t *testing.T, cli *clientv3.Client, s Snapshot) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, EndpointsPrefix(s.Pool), clientv3.WithPrefix(), clientv3.WithRev(s.Revision))
	if err != nil {
		t.Fatalf("get at revision %d: %v", s.Revision, err)
	}
	want := map[string]*registryv1.Endpoint{}
	malformed := 0
	for _, kv := range resp.Kvs {
		ep, err := DecodeEndpoint(string(kv.Key), kv.Value)
		if err != nil {
			malformed++
			continue
		}
		want[ep.GetName()] = ep
	}
	if len(s.Endpoints) != len(want) || len(s.Malformed) != malformed {
		t.Fatalf("snapshot at revision %d has %d endpoints and %d malformed; etcd had %d and %d",
			s.Revision, len(s.Endpoints), len(s.Malformed), len(want), malformed)
	}
	for name, ep := range want {
		if !proto.Equal(s.Endpoints[name], ep) {
			t.Fatalf("snapshot at revision %d: %s = %v, etcd had %v", s.Revision, name, s.Endpoints[name], ep)
		}
	}
}

// checkRevisionsIncrease checks that a watcher's snapshots move forward.
func checkRevisionsIncrease(t *testing.T, snaps []Snapshot) {
	t.Helper()
	for i := 1; i < len(snaps); i++ {
		if snaps[i].Revision <= snaps[i-1].Revision {
			t.Fatalf("snapshot %d at revision %d after revision %d", i, snaps[i].Revision, snaps[i-1].Revision)
		}
	}
}

func TestWatchAddUpdateDelete(t *testing.T) {
	t.Parallel()
	cli := integration(t)
	ctx := testContext(t)
	pool := coordtest.PoolName(t)

	// One endpoint exists before the watch starts.
	first, err := Register(ctx, cli, testEndpoint(pool, "vllm-0"), longTTL, WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = first.Close(ctx) }()

	rec := &recorder{}
	w, err := WatchEndpoints(ctx, cli, pool, rec.record, WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	initial := rec.waitSnapshot(t, "initial", func(Snapshot) bool { return true })
	if len(initial.Endpoints) != 1 || initial.Endpoints["vllm-0"] == nil {
		t.Fatalf("initial snapshot %v, want vllm-0", initial.Endpoints)
	}

	// add
	second, err := Register(ctx, cli, testEndpoint(pool, "vllm-1"), longTTL, WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = second.Close(ctx) }()
	added := rec.waitSnapshot(t, "with vllm-1", func(s Snapshot) bool { return s.Endpoints["vllm-1"] != nil })
	if len(added.Endpoints) != 2 {
		t.Fatalf("after add: %v", added.Endpoints)
	}

	// update
	ep := second.Endpoint()
	ep.Port = 9001
	if err := second.Update(ctx, ep); err != nil {
		t.Fatal(err)
	}
	updated := rec.waitSnapshot(t, "with vllm-1 on port 9001", func(s Snapshot) bool {
		return s.Endpoints["vllm-1"].GetPort() == 9001
	})
	if !proto.Equal(updated.Endpoints["vllm-1"], ep) {
		t.Fatalf("after update: %v, want %v", updated.Endpoints["vllm-1"], ep)
	}

	// delete
	if err := second.Close(ctx); err != nil {
		t.Fatal(err)
	}
	deleted := rec.waitSnapshot(t, "without vllm-1", func(s Snapshot) bool { return s.Endpoints["vllm-1"] == nil })
	if len(deleted.Endpoints) != 1 || deleted.Endpoints["vllm-0"] == nil {
		t.Fatalf("after delete: %v", deleted.Endpoints)
	}

	// Each change was its own snapshot, in order, and every snapshot is what
	// etcd held at its revision.
	snaps := rec.all()
	if len(snaps) != 4 {
		t.Fatalf("got %d snapshots, want 4 (initial, add, update, delete)", len(snaps))
	}
	checkRevisionsIncrease(t, snaps)
	for _, s := range snaps {
		checkConsistent(t, cli, s)
	}
	// Snapshots are copies: the first one still shows one endpoint.
	if len(snaps[0].Endpoints) != 1 {
		t.Fatalf("the initial snapshot changed: %v", snaps[0].Endpoints)
	}
	if got := deleted.Sorted(); len(got) != 1 || got[0].GetName() != "vllm-0" {
		t.Fatalf("Sorted() = %v", got)
	}
}

// A burst of changes while the callback is slow: snapshots are coalesced but
// each is consistent, and the last one is the final state.
func TestWatchBurstConsistent(t *testing.T) {
	t.Parallel()
	cli := integration(t)
	ctx := testContext(t)
	pool := coordtest.PoolName(t)

	rec := &recorder{}
	slow := func(s Snapshot) {
		rec.record(s)
		time.Sleep(5 * time.Millisecond)
	}
	w, err := WatchEndpoints(ctx, cli, pool, slow, WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	rec.waitSnapshot(t, "initial", func(Snapshot) bool { return true })

	const n = 40
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range n {
				name := fmt.Sprintf("vllm-%d-%d", g, i)
				value, err := EncodeEndpoint(testEndpoint(pool, name))
				if err != nil {
					t.Error(err)
					return
				}
				if _, err := cli.Put(ctx, EndpointKey(pool, name), string(value)); err != nil {
					t.Error(err)
					return
				}
				if i%3 == 0 {
					if _, err := cli.Delete(ctx, EndpointKey(pool, name)); err != nil {
						t.Error(err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	eps, rev, err := ListEndpoints(ctx, cli, pool)
	if err != nil {
		t.Fatal(err)
	}
	final := rec.waitSnapshot(t, "at the final revision", func(s Snapshot) bool { return s.Revision >= rev })
	if final.Revision != rev || len(final.Endpoints) != len(eps) {
		t.Fatalf("final snapshot: %d endpoints at revision %d, want %d at %d", len(final.Endpoints), final.Revision, len(eps), rev)
	}
	snaps := rec.all()
	checkRevisionsIncrease(t, snaps)
	for _, s := range snaps {
		checkConsistent(t, cli, s)
	}
	t.Logf("%d changes delivered as %d snapshots", 4*n+4*((n+2)/3), len(snaps))
}

// syncBuffer is a bytes.Buffer safe for the watcher's goroutine and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func TestMalformedSkipped(t *testing.T) {
	t.Parallel()
	cli := integration(t)
	ctx := testContext(t)
	pool := coordtest.PoolName(t)

	valid, err := EncodeEndpoint(testEndpoint(pool, "good"))
	if err != nil {
		t.Fatal(err)
	}
	otherName, err := EncodeEndpoint(testEndpoint(pool, "someone-else"))
	if err != nil {
		t.Fatal(err)
	}
	garbage := EndpointKey(pool, "garbage")
	mismatch := EndpointKey(pool, "mismatch")
	nested := EndpointsPrefix(pool) + "nested/key"
	for key, value := range map[string]string{
		EndpointKey(pool, "good"): string(valid),
		garbage:                   "{not json",
		mismatch:                  string(otherName),
		nested:                    string(valid),
	} {
		if _, err := cli.Put(ctx, key, value); err != nil {
			t.Fatal(err)
		}
	}
	wantMalformed := []string{garbage, mismatch, nested}

	checkSnapshot := func(s Snapshot, malformed []string) {
		t.Helper()
		if len(s.Endpoints) != 1 || s.Endpoints["good"] == nil {
			t.Fatalf("endpoints %v, want only good", s.Endpoints)
		}
		var keys []string
		for _, ke := range s.Malformed {
			if !errors.Is(ke, ErrMalformed) || ke.Err == nil {
				t.Fatalf("malformed entry %v", ke)
			}
			keys = append(keys, ke.Key)
		}
		if strings.Join(keys, " ") != strings.Join(malformed, " ") {
			t.Fatalf("malformed keys %v, want %v", keys, malformed)
		}
	}

	var logs syncBuffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	eps, _, err := ListEndpoints(ctx, cli, pool, WithLogger(logger))
	if err != nil {
		t.Fatal(err)
	}
	if len(eps) != 1 || eps[0].GetName() != "good" {
		t.Fatalf("ListEndpoints = %v, want only good", eps)
	}
	for _, key := range wantMalformed {
		if !strings.Contains(logs.String(), key) {
			t.Fatalf("malformed %s not logged; logs:\n%s", key, logs.String())
		}
	}
	snap, err := LoadSnapshot(ctx, cli, pool, WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	checkSnapshot(snap, wantMalformed)

	rec := &recorder{}
	w, err := WatchEndpoints(ctx, cli, pool, rec.record, WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	checkSnapshot(rec.waitSnapshot(t, "initial", func(Snapshot) bool { return true }), wantMalformed)

	// A malformed value arriving on the watch is skipped as well, and a
	// valid endpoint turned malformed leaves the endpoints.
	if _, err := cli.Put(ctx, EndpointKey(pool, "good"), "[]"); err != nil {
		t.Fatal(err)
	}
	s := rec.waitSnapshot(t, "with good malformed", func(s Snapshot) bool { return s.Endpoints["good"] == nil })
	if len(s.Malformed) != 4 {
		t.Fatalf("malformed %v, want 4 keys", s.Malformed)
	}
	// Fixed and deleted keys leave the malformed list.
	if _, err := cli.Put(ctx, EndpointKey(pool, "good"), string(valid)); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Delete(ctx, garbage); err != nil {
		t.Fatal(err)
	}
	s = rec.waitSnapshot(t, "with garbage deleted", func(s Snapshot) bool { return len(s.Malformed) == 2 && s.Endpoints["good"] != nil })
	checkSnapshot(s, []string{mismatch, nested})
	for _, s := range rec.all() {
		checkConsistent(t, cli, s)
	}
}

// A watch that starts at a compacted revision lists again.
func TestWatchRelistsAfterCompaction(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("integration test: needs an embedded etcd server (skipped with -short)")
	}
	// A server of its own: the compaction would fail the other tests' reads
	// at old revisions.
	cli, _ := coordtest.Start(t)
	ctx := testContext(t)
	pool := coordtest.PoolName(t)

	put := func(name string) {
		t.Helper()
		value, err := EncodeEndpoint(testEndpoint(pool, name))
		if err != nil {
			t.Error(err)
			return
		}
		if _, err := cli.Put(ctx, EndpointKey(pool, name), string(value)); err != nil {
			t.Error(err)
		}
	}
	put("vllm-0")

	// After the first list, before the watch starts: two changes, then a
	// compaction past them, so the watch from the listed revision fails.
	var once sync.Once
	compacted := make(chan struct{})
	hook := func(o *options) {
		o.afterList = func() {
			once.Do(func() {
				defer close(compacted)
				put("vllm-1")
				put("vllm-2")
				resp, err := cli.Get(ctx, "/", clientv3.WithCountOnly())
				if err != nil {
					t.Error(err)
					return
				}
				if _, err := cli.Compact(ctx, resp.Header.GetRevision(), clientv3.WithCompactPhysical()); err != nil {
					t.Error(err)
				}
			})
		}
	}
	var logs syncBuffer
	rec := &recorder{}
	w, err := WatchEndpoints(ctx, cli, pool, rec.record, hook,
		WithLogger(slog.New(slog.NewTextHandler(&logs, nil))), WithRetryBackoff(10*time.Millisecond, 50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	<-compacted
	final := rec.waitSnapshot(t, "with vllm-2", func(s Snapshot) bool { return len(s.Endpoints) == 3 })
	snaps := rec.all()
	if len(snaps) != 2 || len(snaps[0].Endpoints) != 1 {
		t.Fatalf("got %d snapshots (first with %d endpoints), want the first list and the relist", len(snaps), len(snaps[0].Endpoints))
	}
	checkRevisionsIncrease(t, snaps)
	checkConsistent(t, cli, final)
	if !strings.Contains(logs.String(), "compact") {
		t.Fatalf("the relist was not logged with its cause:\n%s", logs.String())
	}

	// The watch runs after the relist.
	put("vllm-3")
	rec.waitSnapshot(t, "with vllm-3", func(s Snapshot) bool { return s.Endpoints["vllm-3"] != nil })
}

func TestWatcherStops(t *testing.T) {
	t.Parallel()
	cli := integration(t)
	ctx := testContext(t)
	pool := coordtest.PoolName(t)

	t.Run("close", func(t *testing.T) {
		rec := &recorder{}
		w, err := WatchEndpoints(ctx, cli, pool, rec.record, WithLogger(testLogger(t)))
		if err != nil {
			t.Fatal(err)
		}
		rec.waitSnapshot(t, "initial", func(Snapshot) bool { return true })
		w.Close()
		w.Close()
		select {
		case <-w.Done():
		default:
			t.Fatal("Done not closed after Close")
		}
	})
	t.Run("context", func(t *testing.T) {
		wctx, cancel := context.WithCancel(ctx)
		w, err := WatchEndpoints(wctx, cli, pool, func(Snapshot) {}, WithLogger(testLogger(t)))
		if err != nil {
			t.Fatal(err)
		}
		cancel()
		select {
		case <-w.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("watcher still running after its context ended")
		}
		w.Close()
	})
	t.Run("client closed", func(t *testing.T) {
		own, err := srv.NewClient()
		if err != nil {
			t.Fatal(err)
		}
		rec := &recorder{}
		w, err := WatchEndpoints(ctx, own, pool, rec.record, WithLogger(testLogger(t)))
		if err != nil {
			t.Fatal(err)
		}
		rec.waitSnapshot(t, "initial", func(Snapshot) bool { return true })
		if err := own.Close(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-w.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("watcher still running after its client closed")
		}
		w.Close()
	})
	t.Run("invalid arguments", func(t *testing.T) {
		if _, err := WatchEndpoints(ctx, cli, pool, nil); err == nil {
			t.Fatal("nil callback accepted")
		}
		if _, err := WatchEndpoints(ctx, nil, pool, func(Snapshot) {}); err == nil {
			t.Fatal("nil client accepted")
		}
	})
}
