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
	if code, body := get("/ready"); code != 503 || !strings.Contains(body, "config not loaded") {
		t.Errorf("/ready %d %q", code, body)
	}
	ready.Store(true)
	if code, _ := get("/ready"); code != 200 {
		t.Errorf("/ready %d once ready", code)
	}
}
