package coord

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/hermod/hermod/testkit/coordtest"
)

const testConfigYAML = `apiVersion: inference.networking.x-k8s.io/v1alpha1
kind: EndpointPickerConfig
plugins:
- type: queue-scorer
`

func TestConfigKey(t *testing.T) {
	if got, want := ConfigKey("pool-a"), "/hermod/pools/pool-a/config"; got != want {
		t.Fatalf("ConfigKey = %q, want %q", got, want)
	}
}

func TestConfigGetPutDelete(t *testing.T) {
	t.Parallel()
	_, cli := integration2(t)
	ctx := testContext(t)
	pool := coordtest.PoolName(t)

	if _, err := GetConfig(ctx, cli, pool); !errors.Is(err, ErrNoConfig) {
		t.Fatalf("GetConfig of a new pool = %v, want ErrNoConfig", err)
	}
	data := []byte(testConfigYAML)
	v1, err := PutConfig(ctx, cli, pool, data)
	if err != nil {
		t.Fatal(err)
	}
	data[0] = 'X' // PutConfig keeps no reference to the caller's bytes
	if v1.Pool != pool || string(v1.Data) != testConfigYAML || v1.Version != 1 || v1.Revision == 0 || v1.Deleted {
		t.Fatalf("first put = %+v", v1)
	}
	got, err := GetConfig(ctx, cli, pool)
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Data) != testConfigYAML || got.Revision != v1.Revision || got.Version != 1 {
		t.Fatalf("GetConfig = %+v, want %+v", got, v1)
	}
	// The bytes are stored as they are: etcdctl shows the YAML.
	if value, _, _ := getKey(t, cli, ConfigKey(pool)); string(value) != testConfigYAML {
		t.Fatalf("stored %q", value)
	}

	v2, err := PutConfig(ctx, cli, pool, []byte("second"))
	if err != nil {
		t.Fatal(err)
	}
	if v2.Version != 2 || v2.Revision <= v1.Revision {
		t.Fatalf("second put = %+v after %+v", v2, v1)
	}
	got, err = GetConfig(ctx, cli, pool)
	if err != nil || got.Revision != v2.Revision || got.Version != 2 || string(got.Data) != "second" {
		t.Fatalf("GetConfig = %+v, %v; want %+v", got, err, v2)
	}

	if err := DeleteConfig(ctx, cli, pool); err != nil {
		t.Fatal(err)
	}
	if _, err := GetConfig(ctx, cli, pool); !errors.Is(err, ErrNoConfig) {
		t.Fatalf("GetConfig after delete = %v, want ErrNoConfig", err)
	}
	if err := DeleteConfig(ctx, cli, pool); !errors.Is(err, ErrNoConfig) {
		t.Fatalf("second DeleteConfig = %v, want ErrNoConfig", err)
	}
	// Written again, the key starts a new life.
	v3, err := PutConfig(ctx, cli, pool, []byte("third"))
	if err != nil || v3.Version != 1 {
		t.Fatalf("put after delete = %+v, %v; want version 1", v3, err)
	}
}

func TestConfigCompareAndSwap(t *testing.T) {
	t.Parallel()
	_, cli := integration2(t)
	ctx := testContext(t)
	pool := coordtest.PoolName(t)

	// IfRevision(0): create only.
	v1, err := PutConfig(ctx, cli, pool, []byte("v1"), IfRevision(0))
	if err != nil || v1.Version != 1 {
		t.Fatalf("create = %+v, %v", v1, err)
	}
	cur, err := PutConfig(ctx, cli, pool, []byte("again"), IfRevision(0))
	if !errors.Is(err, ErrConflict) {
		t.Fatalf("second create = %v, want ErrConflict", err)
	}
	if !strings.Contains(err.Error(), fmt.Sprint(v1.Revision)) || !strings.Contains(err.Error(), ConfigKey(pool)) {
		t.Fatalf("conflict error %q names neither the current revision %d nor the key", err, v1.Revision)
	}
	if cur.Revision != v1.Revision || string(cur.Data) != "v1" || cur.Deleted {
		t.Fatalf("conflict returned %+v, want the current version %+v", cur, v1)
	}

	// Read-modify-write from the version read.
	v2, err := PutConfig(ctx, cli, pool, []byte("v2"), IfRevision(v1.Revision))
	if err != nil || v2.Version != 2 {
		t.Fatalf("swap = %+v, %v", v2, err)
	}
	// A writer that read v1 loses.
	if _, err := PutConfig(ctx, cli, pool, []byte("stale"), IfRevision(v1.Revision)); !errors.Is(err, ErrConflict) {
		t.Fatalf("stale swap = %v, want ErrConflict", err)
	}
	if got, _ := GetConfig(ctx, cli, pool); string(got.Data) != "v2" {
		t.Fatalf("after the stale swap: %q", got.Data)
	}

	// Conditional delete.
	if err := DeleteConfig(ctx, cli, pool, IfRevision(v1.Revision)); !errors.Is(err, ErrConflict) {
		t.Fatalf("stale delete = %v, want ErrConflict", err)
	}
	if err := DeleteConfig(ctx, cli, pool, IfRevision(v2.Revision)); err != nil {
		t.Fatal(err)
	}
	// On an absent config, a swap reports revision 0 and a Deleted version.
	cur, err = PutConfig(ctx, cli, pool, []byte("v3"), IfRevision(v2.Revision))
	if !errors.Is(err, ErrConflict) || !cur.Deleted || cur.Revision != 0 {
		t.Fatalf("swap of a deleted config = %+v, %v", cur, err)
	}
	if err := DeleteConfig(ctx, cli, pool, IfRevision(0)); !errors.Is(err, ErrNoConfig) {
		t.Fatalf("DeleteConfig(IfRevision(0)) of an absent config = %v, want ErrNoConfig", err)
	}

	// Concurrent read-modify-writes: exactly one wins each round.
	base, err := PutConfig(ctx, cli, pool, []byte("base"), IfRevision(0))
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu   sync.Mutex
		wins int
		wg   sync.WaitGroup
	)
	for i := range 8 {
		wg.Go(func() {
			_, err := PutConfig(ctx, cli, pool, fmt.Appendf(nil, "writer-%d", i), IfRevision(base.Revision))
			switch {
			case err == nil:
				mu.Lock()
				wins++
				mu.Unlock()
			case !errors.Is(err, ErrConflict):
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if wins != 1 {
		t.Fatalf("%d concurrent swaps from one revision succeeded, want 1", wins)
	}
}

func TestConfigInvalidArguments(t *testing.T) {
	t.Parallel()
	_, cli := integration2(t)
	ctx := testContext(t)

	if _, err := GetConfig(ctx, cli, "a/b"); !errors.Is(err, ErrInvalidName) {
		t.Fatalf("GetConfig(a/b) = %v, want ErrInvalidName", err)
	}
	if _, err := PutConfig(ctx, cli, "", nil); !errors.Is(err, ErrInvalidName) {
		t.Fatalf("PutConfig(\"\") = %v, want ErrInvalidName", err)
	}
	if err := DeleteConfig(ctx, nil, "pool"); err == nil {
		t.Fatal("DeleteConfig with a nil client succeeded")
	}
	if _, err := WatchConfig(ctx, cli, "pool", nil); err == nil {
		t.Fatal("WatchConfig with a nil callback succeeded")
	}
	if _, err := WatchConfig(ctx, cli, "a/b", func(ConfigVersion) {}); !errors.Is(err, ErrInvalidName) {
		t.Fatalf("WatchConfig(a/b) = %v, want ErrInvalidName", err)
	}
}

// configRecorder collects the versions a ConfigWatcher delivers.
type configRecorder struct {
	mu       sync.Mutex
	versions []ConfigVersion
}

func (r *configRecorder) record(v ConfigVersion) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.versions = append(r.versions, v)
}

func (r *configRecorder) all() []ConfigVersion {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]ConfigVersion(nil), r.versions...)
}

// wait waits until the last version satisfies cond and returns it.
func (r *configRecorder) wait(t *testing.T, what string, cond func(ConfigVersion) bool) ConfigVersion {
	t.Helper()
	var got ConfigVersion
	eventually(t, 10*time.Second, "no config version "+what, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		if n := len(r.versions); n > 0 && cond(r.versions[n-1]) {
			got = r.versions[n-1]
			return true
		}
		return false
	})
	return got
}

// checkConfigSequence checks that a watcher's deliveries are consistent:
// no version twice in a row, present versions in increasing revision order.
func checkConfigSequence(t *testing.T, vs []ConfigVersion) {
	t.Helper()
	var lastRev int64
	for i, v := range vs {
		if i > 0 && sameVersion(v, vs[i-1]) {
			t.Fatalf("version %d delivered twice in a row: %+v", i, v)
		}
		if v.Deleted {
			if v.Data != nil || v.Revision != 0 || v.Version != 0 {
				t.Fatalf("deleted version %d carries data: %+v", i, v)
			}
			continue
		}
		if v.Revision <= lastRev {
			t.Fatalf("version %d at revision %d after revision %d", i, v.Revision, lastRev)
		}
		lastRev = v.Revision
	}
}

func TestWatchConfigOrderAndDeletion(t *testing.T) {
	t.Parallel()
	_, cli := integration2(t)
	ctx := testContext(t)
	pool := coordtest.PoolName(t)

	rec := &configRecorder{}
	w, err := WatchConfig(ctx, cli, pool, rec.record, WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	// No config yet: the first delivery says so.
	first := rec.wait(t, "initial", func(ConfigVersion) bool { return true })
	if !first.Deleted || first.Pool != pool {
		t.Fatalf("initial version %+v, want Deleted", first)
	}

	var written []ConfigVersion
	for i := range 5 {
		v, err := PutConfig(ctx, cli, pool, fmt.Appendf(nil, "version: %d\n", i))
		if err != nil {
			t.Fatal(err)
		}
		written = append(written, v)
		// Wait for each, so that none is coalesced away.
		rec.wait(t, fmt.Sprintf("at revision %d", v.Revision), func(got ConfigVersion) bool { return got.Revision == v.Revision })
	}
	if err := DeleteConfig(ctx, cli, pool); err != nil {
		t.Fatal(err)
	}
	rec.wait(t, "deleted", func(v ConfigVersion) bool { return v.Deleted })
	last, err := PutConfig(ctx, cli, pool, []byte("after delete"))
	if err != nil {
		t.Fatal(err)
	}
	rec.wait(t, "after the delete", func(v ConfigVersion) bool { return v.Revision == last.Revision })

	got := rec.all()
	checkConfigSequence(t, got)
	if len(got) != 1+len(written)+2 {
		t.Fatalf("got %d versions, want %d: %+v", len(got), 1+len(written)+2, got)
	}
	for i, v := range written {
		g := got[1+i]
		if g.Revision != v.Revision || g.Version != v.Version || string(g.Data) != string(v.Data) {
			t.Fatalf("version %d = %+v, want %+v", i, g, v)
		}
	}
	if !got[len(got)-2].Deleted || string(got[len(got)-1].Data) != "after delete" || got[len(got)-1].Version != 1 {
		t.Fatalf("end of the sequence: %+v", got[len(got)-2:])
	}
}

// A burst of writes while the callback is slow: versions are coalesced, in
// order, and the last one delivered is the last one written.
func TestWatchConfigBurstCoalesced(t *testing.T) {
	t.Parallel()
	_, cli := integration2(t)
	ctx := testContext(t)
	pool := coordtest.PoolName(t)

	if _, err := PutConfig(ctx, cli, pool, []byte("initial")); err != nil {
		t.Fatal(err)
	}
	rec := &configRecorder{}
	slow := func(v ConfigVersion) {
		rec.record(v)
		time.Sleep(5 * time.Millisecond)
	}
	w, err := WatchConfig(ctx, cli, pool, slow, WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if v := rec.wait(t, "initial", func(ConfigVersion) bool { return true }); string(v.Data) != "initial" {
		t.Fatalf("initial version %+v", v)
	}
	var last ConfigVersion
	for i := range 100 {
		v, err := PutConfig(ctx, cli, pool, fmt.Appendf(nil, "n: %d", i))
		if err != nil {
			t.Fatal(err)
		}
		last = v
	}
	final := rec.wait(t, "final", func(v ConfigVersion) bool { return v.Revision == last.Revision })
	if string(final.Data) != "n: 99" {
		t.Fatalf("final data %q", final.Data)
	}
	got := rec.all()
	checkConfigSequence(t, got)
	t.Logf("101 versions delivered as %d calls", len(got))
}

// A watch that starts at a compacted revision gets the key again and
// delivers the newer version, once.
func TestWatchConfigRelistsAfterCompaction(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("integration test: needs an embedded etcd server (skipped with -short)")
	}
	cli, _ := coordtest.Start(t)
	ctx := testContext(t)
	pool := coordtest.PoolName(t)

	v1, err := PutConfig(ctx, cli, pool, []byte("v1"))
	if err != nil {
		t.Fatal(err)
	}
	var (
		once      sync.Once
		v3        ConfigVersion
		compacted = make(chan struct{})
	)
	hook := func(o *options) {
		o.afterList = func() {
			once.Do(func() {
				defer close(compacted)
				if _, err := PutConfig(ctx, cli, pool, []byte("v2")); err != nil {
					t.Error(err)
					return
				}
				v, err := PutConfig(ctx, cli, pool, []byte("v3"))
				if err != nil {
					t.Error(err)
					return
				}
				v3 = v
				if _, err := cli.Compact(ctx, v.Revision, clientv3.WithCompactPhysical()); err != nil {
					t.Error(err)
				}
			})
		}
	}
	var logs syncBuffer
	rec := &configRecorder{}
	w, err := WatchConfig(ctx, cli, pool, rec.record, hook,
		WithLogger(newTextLogger(&logs)), WithRetryBackoff(10*time.Millisecond, 50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	<-compacted
	rec.wait(t, "v3", func(v ConfigVersion) bool { return v.Revision == v3.Revision })
	got := rec.all()
	if len(got) != 2 || got[0].Revision != v1.Revision || string(got[1].Data) != "v3" {
		t.Fatalf("got %+v, want v1 then v3 (v2 compacted away)", got)
	}
	if !strings.Contains(logs.String(), "compact") {
		t.Fatalf("the relist was not logged with its cause:\n%s", logs.String())
	}
	// The watch runs after the relist.
	v4, err := PutConfig(ctx, cli, pool, []byte("v4"))
	if err != nil {
		t.Fatal(err)
	}
	rec.wait(t, "v4", func(v ConfigVersion) bool { return v.Revision == v4.Revision })
	checkConfigSequence(t, rec.all())
}

func TestConfigWatcherStops(t *testing.T) {
	t.Parallel()
	_, cli := integration2(t)
	ctx := testContext(t)
	pool := coordtest.PoolName(t)

	wctx, cancel := context.WithCancel(ctx)
	rec := &configRecorder{}
	w, err := WatchConfig(wctx, cli, pool, rec.record, WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	rec.wait(t, "initial", func(ConfigVersion) bool { return true })
	cancel()
	select {
	case <-w.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("config watcher still running after its context ended")
	}
	w.Close()
	w.Close()
}
