package bus

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hermod/hermod/testkit/bustest"
)

// syncBuffer is a bytes.Buffer safe for the concurrent writes of a logger.
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

func TestConnectReconnectsAndLogs(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("integration test: needs an embedded NATS server (skipped with -short)")
	}
	srv := bustest.Start(t)
	var logs syncBuffer
	log := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	nc, err := Connect(testContext(t), srv.ClientURL(), "hermod-test", WithLogger(log), WithBackoff(10*time.Millisecond, 50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if nc.Opts.Name != "hermod-test" || nc.Opts.MaxReconnect != -1 {
		t.Fatalf("options: name %q, max reconnects %d", nc.Opts.Name, nc.Opts.MaxReconnect)
	}
	bustest.Stop(t, srv)
	time.Sleep(100 * time.Millisecond) // several reconnect attempts
	bustest.Restart(t, srv)
	eventually(t, 5*time.Second, "not reconnected", func() bool { return nc.IsConnected() && nc.Stats().Reconnects == 1 })
	eventually(t, time.Second, "reconnect not logged", func() bool { return strings.Contains(logs.String(), `"msg":"nats reconnected"`) })
	for _, want := range []string{`"msg":"nats connected"`, `"msg":"nats disconnected"`, `"connection":"hermod-test"`, `"nats_url":"nats://127.0.0.1:`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("logs lack %s:\n%s", want, logs.String())
		}
	}
}

func TestConnectWaitsForServer(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("integration test: needs an embedded NATS server (skipped with -short)")
	}
	srv := bustest.Start(t)
	bustest.Stop(t, srv)
	go func() {
		time.Sleep(200 * time.Millisecond)
		_ = srv.Restart()
	}()
	nc, err := Connect(testContext(t), srv.ClientURL(), "late", WithLogger(testLogger(t)), WithBackoff(10*time.Millisecond, 50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()
}

func TestConnectGivesUpAtDeadline(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("integration test: needs an embedded NATS server (skipped with -short)")
	}
	srv := bustest.Start(t)
	bustest.Stop(t, srv) // a port where nothing listens
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	nc, err := Connect(ctx, srv.ClientURL(), "never", WithLogger(quietLogger()), WithBackoff(10*time.Millisecond, 50*time.Millisecond))
	if err == nil {
		nc.Close()
		t.Fatal("connected to a stopped server")
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want a deadline error", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("gave up after %s", d)
	}
	canceled, cancel2 := context.WithCancel(context.Background())
	cancel2()
	if _, err := Connect(canceled, srv.ClientURL(), "never"); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled context: err = %v", err)
	}
}

func TestRedactURLs(t *testing.T) {
	got := redactURLs("nats://user:secret@a:4222, nats://b:4222")
	if strings.Contains(got, "secret") || !strings.Contains(got, "nats://b:4222") || !strings.Contains(got, "user:xxxxx@a:4222") {
		t.Fatalf("redactURLs = %q", got)
	}
}
