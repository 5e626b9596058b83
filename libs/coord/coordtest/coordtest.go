// Package coordtest runs a real etcd server in-process for tests: a single
// member on free loopback ports with its data in a temporary directory,
// quiet (log level error) and fast (no fsync, short raft ticks).
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
// Only tests import this package: it pulls in the etcd server.
package coordtest

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// startTimeout bounds how long a server may take to become ready.
const startTimeout = 20 * time.Second

// Server is an embedded single-member etcd server.
type Server struct {
	mu        sync.Mutex
	cfg       *embed.Config
	etcd      *embed.Etcd // nil while stopped
	dir       string
	clientURL string
	logLevel  zap.AtomicLevel
}

// NewServer starts an etcd server on free loopback ports with its data in a
// new temporary directory that Close removes.
func NewServer() (*Server, error) {
	dir, err := os.MkdirTemp("", "hermod-etcd-")
	if err != nil {
		return nil, fmt.Errorf("coordtest: create data dir: %w", err)
	}
	// A free port can be taken by someone else between being picked and
	// being bound: pick again a few times.
	var lastErr error
	for range 5 {
		s := &Server{dir: dir}
		if lastErr = s.configure(); lastErr != nil {
			break
		}
		if lastErr = s.start(); lastErr == nil {
			return s, nil
		}
		if err := cleanDir(dir); err != nil {
			lastErr = errors.Join(lastErr, err)
			break
		}
	}
	_ = os.RemoveAll(dir)
	return nil, lastErr
}

// configure picks the ports and builds the embedded server's config.
func (s *Server) configure() error {
	ports, err := freePorts(2)
	if err != nil {
		return err
	}
	clientURL := &url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", ports[0])}
	peerURL := &url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", ports[1])}

	cfg := embed.NewConfig()
	cfg.Name = "hermod-test"
	cfg.Dir = s.dir
	cfg.ListenClientUrls = []url.URL{*clientURL}
	cfg.AdvertiseClientUrls = []url.URL{*clientURL}
	cfg.ListenPeerUrls = []url.URL{*peerURL}
	cfg.AdvertisePeerUrls = []url.URL{*peerURL}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	// Errors only, and none while stopping (the listeners report their
	// closing as errors).
	s.logLevel = zap.NewAtomicLevelAt(zap.ErrorLevel)
	cfg.LogLevel = "error"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.New(zapcore.NewCore(
		zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()),
		zapcore.Lock(os.Stderr),
		s.logLevel,
	)))
	cfg.EnableGRPCGateway = false
	cfg.UnsafeNoFsync = true
	cfg.SnapshotCount = 1000
	cfg.SnapshotCatchUpEntries = 100
	// Short ticks elect the single member at once. They also lower the
	// minimum lease TTL etcd grants to 1s (3/2 election timeouts, rounded up).
	cfg.TickMs = 50
	cfg.ElectionMs = 500
	s.cfg = cfg
	s.clientURL = clientURL.String()
	return nil
}

// start starts the server with s.cfg and waits until it serves.
func (s *Server) start() error {
	s.logLevel.SetLevel(zap.ErrorLevel)
	e, err := embed.StartEtcd(s.cfg)
	if err != nil {
		return fmt.Errorf("coordtest: start etcd: %w", err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return fmt.Errorf("coordtest: etcd failed while starting: %w", err)
	case <-time.After(startTimeout):
		e.Close()
		return fmt.Errorf("coordtest: etcd not ready after %s", startTimeout)
	}
	s.etcd = e
	return nil
}

// Endpoints returns the client URLs, as clientv3.Config.Endpoints wants them.
func (s *Server) Endpoints() []string { return []string{s.clientURL} }

// NewClient returns a new client of the server; the caller closes it.
func (s *Server) NewClient() (*clientv3.Client, error) {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   s.Endpoints(),
		DialTimeout: 5 * time.Second,
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
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.etcd != nil {
		s.logLevel.SetLevel(zap.FatalLevel)
		s.etcd.Close()
		s.etcd = nil
	}
}

// Restart starts a stopped server again on the same ports with the same
// data; a running server is left as it is.
func (s *Server) Restart() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.etcd != nil {
		return nil
	}
	if s.cfg == nil {
		return errors.New("coordtest: restart of a closed server")
	}
	// The member exists now: join the existing cluster from the data dir.
	s.cfg.ClusterState = embed.ClusterStateFlagExisting
	return s.start()
}

// Close stops the server and removes its data.
func (s *Server) Close() {
	s.Stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cfg = nil
	if s.dir != "" {
		_ = os.RemoveAll(s.dir)
		s.dir = ""
	}
}

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
	return strings.NewReplacer("/", "_", " ", "_").Replace(tb.Name())
}

// freePorts returns n loopback TCP ports that were free a moment ago.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	listeners := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("coordtest: pick a free port: %w", err)
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// cleanDir empties dir after a failed start, so the next try starts fresh.
func cleanDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("coordtest: clean data dir: %w", err)
	}
	for _, e := range entries {
		if err := os.RemoveAll(dir + string(os.PathSeparator) + e.Name()); err != nil {
			return fmt.Errorf("coordtest: clean data dir: %w", err)
		}
	}
	return nil
}
