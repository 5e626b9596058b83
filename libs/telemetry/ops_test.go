package telemetry

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

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
