package telemetry

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

func TestOpsHandler(t *testing.T) {
	reg := NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "hermod_test_things_total", Help: "things"})
	reg.MustRegister(c)
	c.Add(3)
	var ready atomic.Bool
	srv := httptest.NewServer(OpsHandler(reg, func() error {
		if !ready.Load() {
			return errors.New("config not loaded")
		}
		return nil
	}))
	defer srv.Close()

	get := func(path string) (int, string) {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/metrics"); code != 200 || !strings.Contains(body, "hermod_test_things_total 3") || !strings.Contains(body, "go_goroutines") {
		t.Errorf("/metrics %d:\n%s", code, body)
	}
	if code, _ := get("/health"); code != 200 {
		t.Errorf("/health %d", code)
	}
	// the reason is logged, not answered (it may name internal addresses)
	if code, body := get("/ready"); code != 503 || strings.Contains(body, "config not loaded") {
		t.Errorf("/ready %d %q", code, body)
	}
	ready.Store(true)
	if code, _ := get("/ready"); code != 200 {
		t.Errorf("/ready %d once ready", code)
	}
}

func TestRequireBearer(t *testing.T) {
	ops := OpsHandler(NewRegistry(), nil)
	for _, c := range []struct {
		token, path, auth string
		want              int
	}{
		{"", "/metrics", "", http.StatusOK},
		{"s3cret", "/health", "", http.StatusOK},
		{"s3cret", "/ready", "", http.StatusOK},
		{"s3cret", "/metrics", "", http.StatusUnauthorized},
		{"s3cret", "/metrics", "Bearer wrong", http.StatusUnauthorized},
		{"s3cret", "/metrics", "Basic s3cret", http.StatusUnauthorized},
		{"s3cret", "/metrics", "Bearer s3cret", http.StatusOK},
		{"s3cret", "/metrics", "bearer  s3cret", http.StatusOK},
		{"s3cret", "/debug/anything", "", http.StatusUnauthorized},
	} {
		r := httptest.NewRequest(http.MethodGet, c.path, nil)
		if c.auth != "" {
			r.Header.Set("Authorization", c.auth)
		}
		w := httptest.NewRecorder()
		RequireBearer(c.token, ops).ServeHTTP(w, r)
		if w.Code != c.want {
			t.Errorf("token %q %s %q: %d, want %d", c.token, c.path, c.auth, w.Code, c.want)
		}
	}
}

// An ops server drops a client that trickles its headers and one that
// stays idle, within its bounds, and still answers one that behaves.
func TestOpsServerBoundsClients(t *testing.T) {
	tm := OpsTimeouts{ReadHeader: 200 * time.Millisecond, Read: 300 * time.Millisecond, Write: time.Second, Idle: 300 * time.Millisecond, MaxHeaderBytes: 1 << 10}
	srv := tm.Server(OpsHandler(prometheus.NewRegistry(), nil))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	defer func() {
		_ = srv.Close()
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			t.Error(err)
		}
	}()
	closedWithin := func(what, send string, limit time.Duration) {
		t.Helper()
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = c.Close() }()
		start := time.Now()
		if _, err := io.WriteString(c, send); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, _ = io.Copy(io.Discard, c) // until the server closes it
		if took := time.Since(start); took > limit {
			t.Errorf("%s: the server kept the connection %v (bound %v)", what, took, limit)
		}
	}
	closedWithin("headers never finished", "GET /health HTTP/1.1\r\nHost: ops\r\n", 2*time.Second)
	closedWithin("idle after an answer", "GET /health HTTP/1.1\r\nHost: ops\r\n\r\n", 2*time.Second)

	resp, err := http.Get("http://" + l.Addr().String() + "/health")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("a well-behaved client: %s", resp.Status)
	}
	big, err := http.NewRequest(http.MethodGet, "http://"+l.Addr().String()+"/health", nil)
	if err != nil {
		t.Fatal(err)
	}
	big.Header.Set("X-Padding", strings.Repeat("x", 8<<10))
	resp, err = http.DefaultClient.Do(big)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("8 KiB of headers over a 1 KiB bound: %s", resp.Status)
	}
	http.DefaultClient.CloseIdleConnections()
}
