package etcdembed

import (
	"context"
	"log/slog"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(settled{m}) }

// settled runs the tests, then gives the peers' HTTP connections of closed
// clusters up to PeerConnLinger to end before the leak check.
type settled struct{ m *testing.M }

func (s settled) Run() int {
	code := s.m.Run()
	for deadline := time.Now().Add(PeerConnLinger); goleak.Find() != nil && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
	}
	return code
}

func startServer(t *testing.T, opts Options) *Server {
	t.Helper()
	if testing.Short() {
		t.Skip("starts an etcd server (skipped with -short)")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	s, err := Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func newClient(t *testing.T, s *Server) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: s.ClientURLs(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

func get(t *testing.T, cli *clientv3.Client, key string, timeout time.Duration) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	resp, err := cli.Get(ctx, key)
	if err != nil {
		return "", err
	}
	if len(resp.Kvs) == 0 {
		return "", nil
	}
	return string(resp.Kvs[0].Value), nil
}

func put(t *testing.T, cli *clientv3.Client, key, value string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, key, value); err != nil {
		t.Fatal(err)
	}
}

// The zero Options: loopback, free ports, a temporary data dir that Close
// removes; Stop and Restart keep the data and the address.
func TestDefaultsStopRestartClose(t *testing.T) {
	t.Parallel()
	s := startServer(t, Options{UnsafeNoFsync: true})
	urls := s.ClientURLs()
	if len(urls) != 1 {
		t.Fatalf("ClientURLs = %v", urls)
	}
	u, err := url.Parse(urls[0])
	if err != nil || u.Hostname() != "127.0.0.1" || u.Port() == "" || u.Port() == "0" {
		t.Fatalf("client URL %q (%v), want loopback with a port", urls[0], err)
	}
	dir := s.Dir()
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("data dir: %v", err)
	}
	cli := newClient(t, s)
	put(t, cli, "/k", "v")

	// Leases down to 1s are granted as asked.
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	grant, err := cli.Grant(ctx, 1)
	if err != nil || grant.TTL != 1 {
		t.Fatalf("Grant(1) = %+v, %v", grant, err)
	}

	s.Stop()
	s.Stop()
	if s.Running() {
		t.Fatal("Running after Stop")
	}
	if _, err := get(t, cli, "/k", 300*time.Millisecond); err == nil {
		t.Fatal("Get succeeded while stopped")
	}
	rctx, rcancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer rcancel()
	if err := s.Restart(rctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Restart(rctx); err != nil {
		t.Fatalf("Restart of a running server: %v", err)
	}
	if !s.Running() || s.ClientURLs()[0] != urls[0] {
		t.Fatalf("after Restart: running %v at %v, want %v", s.Running(), s.ClientURLs(), urls)
	}
	if v, err := get(t, cli, "/k", 10*time.Second); err != nil || v != "v" {
		t.Fatalf("after Restart: %q, %v", v, err)
	}
	if err := cli.Close(); err != nil {
		t.Fatal(err)
	}

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("temporary data dir after Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := s.Restart(rctx); err == nil {
		t.Fatal("Restart after Close succeeded")
	}
}

// A given data dir is kept, and a new server on it resumes its data.
func TestDataDirResumed(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	peerPort := freePort(t)
	s := startServer(t, Options{Dir: dir, PeerPort: peerPort, UnsafeNoFsync: true})
	cli := newClient(t, s)
	put(t, cli, "/persisted", "yes")
	if err := cli.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir + "/member"); err != nil {
		t.Fatalf("given data dir after Close: %v", err)
	}

	again := startServer(t, Options{Dir: dir, PeerPort: peerPort, UnsafeNoFsync: true})
	if v, err := get(t, newClient(t, again), "/persisted", 10*time.Second); err != nil || v != "yes" {
		t.Fatalf("resumed server: %q, %v", v, err)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	ports, err := freePorts("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	return ports[0]
}

// Given ports are used as they are; a taken one fails the start at once.
func TestFixedPorts(t *testing.T) {
	t.Parallel()
	port := freePort(t)
	s := startServer(t, Options{ClientPort: port, UnsafeNoFsync: true})
	if want := "http://127.0.0.1:" + strconv.Itoa(port); s.ClientURLs()[0] != want {
		t.Fatalf("ClientURLs = %v, want %s", s.ClientURLs(), want)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	start := time.Now()
	other, err := Start(ctx, Options{ClientPort: port, UnsafeNoFsync: true})
	if err == nil {
		_ = other.Close()
		t.Fatal("a second server started on a taken port")
	}
	if !isAddrInUse(err) {
		t.Fatalf("start on a taken port: %v, want address in use", err)
	}
	t.Logf("start on a taken port failed after %s: %v", time.Since(start).Round(time.Millisecond), err)
}

// An unspecified client host binds every interface and advertises loopback.
func TestUnspecifiedHostAdvertisesLoopback(t *testing.T) {
	t.Parallel()
	s := startServer(t, Options{ClientHost: "0.0.0.0", UnsafeNoFsync: true})
	u, err := url.Parse(s.ClientURLs()[0])
	if err != nil || u.Hostname() != "127.0.0.1" {
		t.Fatalf("ClientURLs = %v", s.ClientURLs())
	}
	put(t, newClient(t, s), "/k", "v")
}

// recordHandler keeps the records it handles.
type recordHandler struct {
	mu      *sync.Mutex
	records *[]slog.Record
	attrs   []slog.Attr
}

func newRecordHandler() recordHandler {
	return recordHandler{mu: &sync.Mutex{}, records: &[]slog.Record{}}
}

func (h recordHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h recordHandler) Handle(_ context.Context, r slog.Record) error {
	r = r.Clone()
	r.AddAttrs(h.attrs...)
	h.mu.Lock()
	defer h.mu.Unlock()
	*h.records = append(*h.records, r)
	return nil
}

func (h recordHandler) WithAttrs(as []slog.Attr) slog.Handler {
	h.attrs = append(append([]slog.Attr(nil), h.attrs...), as...)
	return h
}

func (h recordHandler) WithGroup(string) slog.Handler { return h }

func (h recordHandler) all() []slog.Record {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]slog.Record(nil), *h.records...)
}

// etcd's logs reach an slog.Logger at the level asked, with snake_case keys,
// and nothing is logged while the server stops.
func TestSlogBridge(t *testing.T) {
	t.Parallel()
	h := newRecordHandler()
	level := &slog.LevelVar{}
	level.Set(slog.LevelInfo)
	s := startServer(t, Options{Logger: slog.New(h), LogLevel: level, UnsafeNoFsync: true})
	// etcd publishes the member (and logs it) in the background: the
	// server may serve before that line is written.
	published := func() bool {
		for _, r := range h.all() {
			if strings.Contains(r.Message, "published local member to cluster") {
				return true
			}
		}
		return false
	}
	for deadline := time.Now().Add(10 * time.Second); !published() && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	records := h.all()
	if len(records) == 0 {
		t.Fatal("no etcd logs at info level")
	}
	sawReady := false
	for _, r := range records {
		if r.Level < slog.LevelInfo {
			t.Fatalf("record below the level: %v %q", r.Level, r.Message)
		}
		sawReady = sawReady || strings.Contains(r.Message, "published local member to cluster")
		r.Attrs(func(a slog.Attr) bool {
			if strings.ContainsAny(a.Key, "- ") {
				t.Errorf("key %q of %q is not snake_case", a.Key, r.Message)
			}
			return true
		})
	}
	if !sawReady {
		t.Fatalf("no message of the member's start among %d records", len(records))
	}

	// Raised at run time: nothing below error any more. An entry made
	// before the level was raised may still be on its way to the handler
	// (etcd logs from its own goroutines), so only entries made after count.
	level.Set(slog.LevelError)
	raised := time.Now()
	s.Stop()
	for _, r := range h.all() {
		if r.Time.After(raised) {
			t.Fatalf("record made after the level was raised (or while stopping): %v %q", r.Level, r.Message)
		}
	}
}

func TestLevelMapping(t *testing.T) {
	for _, tc := range []struct {
		zap  zapcore.Level
		slog slog.Level
	}{
		{zapcore.DebugLevel, slog.LevelDebug},
		{zapcore.InfoLevel, slog.LevelInfo},
		{zapcore.WarnLevel, slog.LevelWarn},
		{zapcore.ErrorLevel, slog.LevelError},
	} {
		if got := slogLevel(tc.zap); got != tc.slog {
			t.Errorf("slogLevel(%v) = %v, want %v", tc.zap, got, tc.slog)
		}
		if got := zapLevel(tc.slog); got != tc.zap {
			t.Errorf("zapLevel(%v) = %v, want %v", tc.slog, got, tc.zap)
		}
	}
	if slogLevel(zapcore.FatalLevel) <= slog.LevelError {
		t.Error("fatal is not above error")
	}
	if zapLevel(slog.LevelError+4) != zapcore.ErrorLevel || zapLevel(slog.LevelDebug-4) != zapcore.DebugLevel {
		t.Error("levels beyond the ends are not clamped")
	}
}

func TestSnakeCase(t *testing.T) {
	for in, want := range map[string]string{"local-member-id": "local_member_id", "error": "error", "a b": "a_b"} {
		if got := snakeCase(in); got != want {
			t.Errorf("snakeCase(%q) = %q, want %q", in, got, want)
		}
	}
}
