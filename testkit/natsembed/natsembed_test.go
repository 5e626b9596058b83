package natsembed

import (
	"bytes"
	"context"
	"log/slog"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// nats-server (v2.15.2) starts a file store's state flusher with a
		// bare go statement (server/filestore.go:659), outside the
		// goroutines Server.Shutdown waits for (startGoRoutine and grWG,
		// server.go:4135, 2759), and the loop ends only when the store is
		// stopped. Shutdown+WaitForShutdown, which every path here calls,
		// therefore does not cover a store that nats-server itself fails to
		// stop or stops late: createRaftGroup does not stop the WAL store it
		// just opened when starting the raft node fails
		// (jetstream_cluster.go:4067, 4094-4097), as it does with
		// ErrNoSysAccount (raft.go:488-491) once Shutdown's
		// shutdownEventing (server.go:2634) has cleared s.sys
		// (events.go:1931) while the meta monitor is still applying an
		// assignment, before shutdownJetStream (server.go:2654) stops it;
		// a stop without state write (Delete, filestore.go:12242) does not
		// wait for the loop to exit (the wait is filestore.go:12833-12837).
		// No exported API reaches those stores, so there is nothing to stop
		// or wait for from here. Only this function is ignored: a server
		// these tests fail to shut down still leaks its accept loops,
		// routes and raft goroutines, which goleak reports.
		goleak.IgnoreTopFunction("github.com/nats-io/nats-server/v2/server.(*fileStore).flushStreamStateLoop"),
	)
}

func skipShort(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: starts an embedded NATS server (skipped with -short)")
	}
}

func connect(t *testing.T, s *Server) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(s.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond),
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

func TestRestartKeepsPortAndStore(t *testing.T) {
	skipShort(t)
	s, err := Start(Options{JetStream: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown()
	url, dir := s.ClientURL(), s.StoreDir()
	if !strings.HasPrefix(url, "nats://127.0.0.1:") || strings.HasSuffix(url, ":0") || strings.HasSuffix(url, ":-1") {
		t.Fatalf("ClientURL = %s", url)
	}
	nc, js := connect(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "t.1", []byte("x")); err != nil {
		t.Fatal(err)
	}

	s.Stop()
	if s.Running() || s.NATSServer() != nil {
		t.Fatal("running after Stop")
	}
	s.Stop() // again: no-op
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if s.ClientURL() != url || s.StoreDir() != dir || !s.Running() {
		t.Fatalf("after restart: %s %s, want %s %s", s.ClientURL(), s.StoreDir(), url, dir)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !nc.IsConnected() || nc.Stats().Reconnects == 0 {
		if time.Now().After(deadline) {
			t.Fatal("client did not reconnect")
		}
		time.Sleep(10 * time.Millisecond)
	}
	st, err := js.Stream(ctx, "T")
	if err != nil {
		t.Fatalf("stream lost across restart: %v", err)
	}
	if n := st.CachedInfo().State.Msgs; n != 1 {
		t.Fatalf("stream holds %d messages after restart, want 1", n)
	}
	nc.Close()

	s.Shutdown()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("temporary store %s not removed: %v", dir, err)
	}
	s.Shutdown() // again: no-op
}

func TestCallerStoreDirIsKept(t *testing.T) {
	skipShort(t)
	dir := t.TempDir()
	s, err := Start(Options{JetStream: true, StoreDir: dir, MaxMemory: 64 << 20, MaxStore: 256 << 20})
	if err != nil {
		t.Fatal(err)
	}
	s.Shutdown()
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("caller's store removed: %v", err)
	}
}

func TestWithoutJetStream(t *testing.T) {
	skipShort(t)
	s, err := Start(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown()
	if s.StoreDir() != "" {
		t.Fatalf("StoreDir = %q without JetStream", s.StoreDir())
	}
	nc, _ := connect(t, s)
	sub, err := nc.SubscribeSync("x")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Publish("x", []byte("y")); err != nil {
		t.Fatal(err)
	}
	if _, err := sub.NextMsg(5 * time.Second); err != nil {
		t.Fatal(err)
	}
}

func TestFixedPortInUse(t *testing.T) {
	skipShort(t)
	a, err := Start(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Shutdown()
	u, err := url.Parse(a.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if b, err := Start(Options{Port: port}); err == nil {
		b.Shutdown()
		t.Fatal("second server on a used port started")
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("failing took %s", d)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestLogsThroughSlog(t *testing.T) {
	skipShort(t)
	var buf syncBuffer
	s, err := Start(Options{JetStream: true, Logger: slog.New(slog.NewTextHandler(&buf, nil))})
	if err != nil {
		t.Fatal(err)
	}
	s.Shutdown()
	if !strings.Contains(buf.String(), "Server is ready") {
		t.Fatalf("no server log:\n%s", buf.String())
	}
}
