package reqbody

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// Bodies held at once stay within the budget: a request whose body does
// not fit while others hold theirs gets 503 server_busy, and once they are
// served the bytes are back.
func TestBudget(t *testing.T) {
	budget := NewBudget(96 << 10)
	hold := make(chan struct{})
	var held sync.WaitGroup
	srv := httptest.NewServer(Bound(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := Read(w, r, 1<<20, 0)
		if err != nil {
			Answer(err, 1<<20).Write(w)
			return
		}
		if r.URL.Path == "/hold" {
			held.Done()
			<-hold
		}
		_, _ = w.Write([]byte{byte(len(b) >> 10)})
	}), time.Minute, budget))
	defer srv.Close()
	post := func(path string, n int) (int, []byte) {
		resp, err := http.Post(srv.URL+path, "application/octet-stream", bytes.NewReader(make([]byte, n)))
		if err != nil {
			t.Error(err)
			return 0, nil
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	held.Add(1)
	done := make(chan int)
	go func() { code, _ := post("/hold", 60<<10); done <- code }()
	held.Wait()
	if u := budget.Used(); u < 60<<10 || u > 96<<10 {
		t.Fatalf("a held 60 KiB body uses %d bytes of the budget", u)
	}
	code, body := post("/", 50<<10)
	var e struct {
		Error struct{ Code string } `json:"error"`
	}
	_ = json.Unmarshal(body, &e)
	if code != http.StatusServiceUnavailable || e.Error.Code != "server_busy" {
		t.Fatalf("a body past the budget: %d %s", code, body)
	}
	if code, _ := post("/", 8<<10); code != http.StatusOK {
		t.Fatalf("a small body with room left: %d", code)
	}
	close(hold)
	if code := <-done; code != http.StatusOK {
		t.Fatalf("the held request: %d", code)
	}
	if code, _ := post("/", 50<<10); code != http.StatusOK {
		t.Fatalf("the same body once the budget has room: %d", code)
	}
	// a request gives its bytes back as its handler returns, which may
	// be just after its client has the answer
	for deadline := time.Now().Add(5 * time.Second); budget.Used() != 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes still held after every request was served", budget.Used())
		}
	}
}
