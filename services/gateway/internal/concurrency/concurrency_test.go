package concurrency

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// At most max requests are served at once: the next is refused 503
// server_busy with Retry-After (in Anthropic's shape on its paths) without
// reaching the handler, and once one ends there is room again.
func TestLimiterBoundsRequestsAtOnce(t *testing.T) {
	const max = 3
	l := New(max)
	release := make(chan struct{})
	var entered sync.WaitGroup
	var reached int
	var mu sync.Mutex
	srv := httptest.NewServer(l.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		reached++
		mu.Unlock()
		if r.URL.Path == "/hold" {
			entered.Done()
			<-release
		}
		_, _ = io.WriteString(w, "ok")
	})))
	defer srv.Close()
	type answer struct {
		StatusCode int
		Status     string
		Header     http.Header
	}
	get := func(path string) (answer, []byte) {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return answer{resp.StatusCode, resp.Status, resp.Header}, b
	}
	entered.Add(max)
	var held sync.WaitGroup
	for range max {
		held.Add(1)
		go func() {
			defer held.Done()
			if resp, b := get("/hold"); resp.StatusCode != http.StatusOK {
				t.Errorf("a held request: %s %s", resp.Status, b)
			}
		}()
	}
	entered.Wait()
	if n := l.InFlight(); n != max {
		t.Fatalf("in flight: %d, want %d", n, max)
	}
	resp, b := get("/v1/completions")
	var e struct {
		Error struct{ Code string } `json:"error"`
	}
	if err := json.Unmarshal(b, &e); err != nil || resp.StatusCode != http.StatusServiceUnavailable || e.Error.Code != "server_busy" || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("a request past the bound: %s %s", resp.Status, b)
	}
	resp, b = get("/v1/messages")
	var a struct{ Type string }
	if err := json.Unmarshal(b, &a); err != nil || resp.StatusCode != http.StatusServiceUnavailable || a.Type != "error" {
		t.Fatalf("an Anthropic request past the bound: %s %s", resp.Status, b)
	}
	mu.Lock()
	if reached != max {
		t.Errorf("the handler saw %d requests, want only the %d admitted", reached, max)
	}
	mu.Unlock()
	if l.Shed() != 2 {
		t.Errorf("shed: %d, want 2", l.Shed())
	}
	close(release)
	held.Wait()
	if resp, b := get("/v1/completions"); resp.StatusCode != http.StatusOK {
		t.Fatalf("a request once the held ones ended: %s %s", resp.Status, b)
	}
	if n := l.InFlight(); n != 0 {
		t.Fatalf("in flight after every request: %d", n)
	}
	http.DefaultClient.CloseIdleConnections()
}

// A nil limiter (no bound) serves everything.
func TestNilLimiter(t *testing.T) {
	l := New(0)
	if l != nil {
		t.Fatal("New(0) bounds requests")
	}
	rec := httptest.NewRecorder()
	l.Wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })).
		ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	if rec.Code != http.StatusNoContent || l.InFlight() != 0 || l.Shed() != 0 {
		t.Fatalf("nil limiter: %d", rec.Code)
	}
}
