package coord

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"

	"github.com/hermod/hermod/testkit/coordtest"
)

// srv is the etcd server the integration tests share, started by the first
// of them (unit tests and fuzzing need none); each test uses a pool of its
// own (coordtest.PoolName).
var (
	srv     *coordtest.Server
	srvErr  error
	srvOnce sync.Once
)

// srv2 is the server shared by the tests of the config store, election and
// membership. It keeps their writes off srv, whose tests compare snapshot
// revisions with the store's revision and so expect writes from the
// endpoint registry tests only.
var (
	srv2     *coordtest.Server
	srv2Err  error
	srv2Once sync.Once
)

// suite runs the tests inside goleak's check and stops the shared server
// before it, so that the check also proves that the server and every client
// stopped.
type suite struct{ m *testing.M }

func (s suite) Run() int {
	code := s.m.Run()
	if srv != nil {
		srv.Close()
	}
	if srv2 != nil {
		srv2.Close()
	}
	// The peer connections of the cluster tests' etcd clusters end a few
	// seconds after them.
	coordtest.SettleGoroutines()
	return code
}

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(suite{m})
}

// integration skips the test under -short and returns a client of the shared
// server, closed when the test ends.
func integration(t *testing.T) *clientv3.Client {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: needs an embedded etcd server (skipped with -short)")
	}
	srvOnce.Do(func() { srv, srvErr = coordtest.NewServer() })
	if srvErr != nil {
		t.Fatal(srvErr)
	}
	return srv.Client(t)
}

// integration2 is integration on srv2; it returns the server too.
func integration2(t *testing.T) (*coordtest.Server, *clientv3.Client) {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: needs an embedded etcd server (skipped with -short)")
	}
	srv2Once.Do(func() { srv2, srv2Err = coordtest.NewServer() })
	if srv2Err != nil {
		t.Fatal(srv2Err)
	}
	return srv2, srv2.Client(t)
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// testLogger logs into the test's output.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// eventually polls cond every 10ms until it holds or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// getKey returns the value and lease of a key, or ok false if it is absent.
func getKey(t *testing.T, cli *clientv3.Client, key string) (value []byte, lease clientv3.LeaseID, ok bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, key)
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, 0, false
	}
	return resp.Kvs[0].Value, clientv3.LeaseID(resp.Kvs[0].Lease), true
}

// recorder collects the snapshots a Watcher delivers.
type recorder struct {
	mu    sync.Mutex
	snaps []Snapshot
}

func (r *recorder) record(s Snapshot) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.snaps = append(r.snaps, s)
}

func (r *recorder) all() []Snapshot {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Snapshot(nil), r.snaps...)
}

func (r *recorder) last() (Snapshot, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.snaps) == 0 {
		return Snapshot{}, false
	}
	return r.snaps[len(r.snaps)-1], true
}

// waitSnapshot waits until the last snapshot satisfies cond and returns it.
func (r *recorder) waitSnapshot(t *testing.T, what string, cond func(Snapshot) bool) Snapshot {
	t.Helper()
	var got Snapshot
	eventually(t, 5*time.Second, "no snapshot "+what, func() bool {
		s, ok := r.last()
		if ok && cond(s) {
			got = s
			return true
		}
		return false
	})
	return got
}

// newTextLogger returns a logger that writes text records into w.
func newTextLogger(w *syncBuffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, nil))
}
