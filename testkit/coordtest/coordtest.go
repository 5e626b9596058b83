// Package coordtest runs a real etcd server in-process for tests: a single
// member (etcdembed) on free loopback ports with its data in a temporary
// directory, quiet (log level error) and fast (no fsync, short raft ticks).
//
// Start one server per test binary from TestMain where possible:
//
//	var srv *coordtest.Server
//
//	func TestMain(m *testing.M) {
//		var err error
//		if srv, err = coordtest.NewServer(); err != nil {
//			fmt.Fprintln(os.Stderr, err)
//			os.Exit(1)
//		}
//		code := m.Run()
//		srv.Close()
//		os.Exit(code)
//	}
//
// and give every test its own client with srv.Client(t) and its own key
// space (a pool name derived from the test name). Start is the one-call form
// for a test that needs a server of its own.
//
// Only tests import this package; programs use etcdembed.
package coordtest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	"github.com/hermod/hermod/testkit/etcdembed"
)

// startTimeout bounds how long a server may take to become ready.
const startTimeout = 20 * time.Second

// Server is an embedded single-member etcd server.
type Server struct {
	srv *etcdembed.Server
}

// NewServer starts an etcd server on free loopback ports with its data in a
// new temporary directory that Close removes.
func NewServer() (*Server, error) {
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	srv, err := etcdembed.Start(ctx, etcdembed.Options{
		Name:          "hermod-test",
		UnsafeNoFsync: true,
		SnapshotCount: 1000,
		// Tests compact when they mean to.
		CompactionRetention: -1,
	})
	if err != nil {
		return nil, fmt.Errorf("coordtest: %w", err)
	}
	return &Server{srv: srv}, nil
}

// dialOptions reconnect the way coord.NewClient's clients do
// (libs/coord/etcddial: testkit cannot import libs, which imports it):
// within 2 s of etcd's return, not after gRPC's default backoff, which
// grows to 120 s and leaves a client disconnected for seconds after an
// outage a test makes.
func dialOptions() []grpc.DialOption {
	return []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
		Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 2 * time.Second},
		MinConnectTimeout: 5 * time.Second,
	})}
}

// Endpoints returns the client URLs, as clientv3.Config.Endpoints wants them.
func (s *Server) Endpoints() []string { return s.srv.ClientURLs() }

// NewClient returns a new client of the server; the caller closes it.
func (s *Server) NewClient() (*clientv3.Client, error) {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   s.Endpoints(),
		DialTimeout: 5 * time.Second,
		DialOptions: dialOptions(),
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("coordtest: new client: %w", err)
	}
	return cli, nil
}

// Client returns a new client of the server that is closed when the test
// ends (closing it earlier is fine).
func (s *Server) Client(tb testing.TB) *clientv3.Client {
	tb.Helper()
	cli, err := s.NewClient()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = cli.Close() })
	return cli
}

// Stop stops the server and keeps its data and ports, for Restart. Clients
// see the server as unreachable until then.
func (s *Server) Stop() { s.srv.Stop() }

// Restart starts a stopped server again on the same ports with the same
// data; a running server is left as it is.
func (s *Server) Restart() error {
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if err := s.srv.Restart(ctx); err != nil {
		return fmt.Errorf("coordtest: %w", err)
	}
	return nil
}

// Close stops the server and removes its data.
func (s *Server) Close() { _ = s.srv.Close() }

// Start starts a server of the test's own and returns a client of it and a
// stop func that closes both. The stop func also runs when the test ends;
// calling it twice is fine.
func Start(tb testing.TB) (*clientv3.Client, func()) {
	tb.Helper()
	srv, err := NewServer()
	if err != nil {
		tb.Fatal(err)
	}
	cli, err := srv.NewClient()
	if err != nil {
		srv.Close()
		tb.Fatal(err)
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			_ = cli.Close()
			srv.Close()
		})
	}
	tb.Cleanup(stop)
	return cli, stop
}

// PoolName turns a test name into a valid pool name of its own, so that tests
// sharing a server do not see each other's keys.
func PoolName(tb testing.TB) string {
	name := strings.NewReplacer("/", "_", " ", "_").Replace(tb.Name())
	poolNames.mu.Lock()
	defer poolNames.mu.Unlock()
	if poolNames.byName == nil {
		poolNames.byName = map[string]poolRun{}
	}
	r, seen := poolNames.byName[name]
	switch {
	case !seen:
		r = poolRun{tb: tb, n: 1}
	case r.tb != tb: // the test runs again (-count): a pool of its own
		r = poolRun{tb: tb, n: r.n + 1}
	}
	poolNames.byName[name] = r
	if r.n > 1 {
		return fmt.Sprintf("%s-run%d", name, r.n)
	}
	return name
}

// poolNames remembers which test run each pool name went to: servers
// outlive one run of a test (they serve the whole test binary), so a test
// run again with -count gets a pool its earlier runs did not write to.
var poolNames struct {
	mu     sync.Mutex
	byName map[string]poolRun
}

type poolRun struct {
	tb testing.TB
	n  int
}
