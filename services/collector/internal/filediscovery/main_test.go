package filediscovery

import (
	"log/slog"
	"strings"
	"sync"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"

	"github.com/hermod/hermod/testkit/coordtest"
)

// srv is the etcd server the integration tests share, started by the first
// of them; each test uses a pool of its own (coordtest.PoolName).
var (
	srv     *coordtest.Server
	srvErr  error
	srvOnce sync.Once
)

// suite runs the tests inside goleak's check and stops the shared server
// before it, so that the check also proves that every Source, client and
// server stopped.
type suite struct{ m *testing.M }

func (s suite) Run() int {
	code := s.m.Run()
	if srv != nil {
		srv.Close()
	}
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

// testLogger returns a logger into the test's log that stops writing when
// the test ends (goroutines may log while they stop).
func testLogger(t *testing.T) *slog.Logger {
	t.Helper()
	w := &testWriter{t: t}
	t.Cleanup(w.stop)
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct {
	mu   sync.Mutex
	t    *testing.T
	done bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimSuffix(string(p), "\n"))
	}
	return len(p), nil
}

func (w *testWriter) stop() {
	w.mu.Lock()
	w.done = true
	w.mu.Unlock()
}
