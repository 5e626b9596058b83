package background

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hermod/hermod/services/responses/internal/memory"
	"github.com/hermod/hermod/services/responses/internal/store"
)

// gateway answers runs as the gateway does: it stores the outcome only
// while the run holds the job (409 otherwise).
type gateway struct {
	jobs  *memory.Store
	runs  atomic.Int32
	serve func(w http.ResponseWriter, r *http.Request, id, token string)
}

func (g *gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.runs.Add(1)
	id, token, _ := strings.Cut(r.Header.Get(RunHeader), " ")
	if r.Header.Get("Authorization") != "Bearer k" {
		http.Error(w, `{"error":{"message":"no credentials"}}`, http.StatusUnauthorized)
		return
	}
	if g.serve != nil {
		g.serve(w, r, id, token)
		return
	}
	if err := g.jobs.Complete(r.Context(), &store.Record{ID: id, Data: []byte("done")}, token, nil); err != nil {
		http.Error(w, err.Error(), http.StatusConflict)
	}
}

func start(t *testing.T, st *memory.Store, gatewayURL string, lease time.Duration) {
	t.Helper()
	r := New(Options{Jobs: st, GatewayURL: gatewayURL, Workers: 2, Lease: lease, Poll: 20 * time.Millisecond, MaxAttempts: 3})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

func submit(t *testing.T, st *memory.Store, id, auth string) {
	t.Helper()
	err := st.Submit(context.Background(), &store.Record{ID: id, Data: []byte("queued")},
		&store.Job{Request: []byte(`{"model":"m","input":"x","background":true}`), Headers: map[string]string{"Authorization": auth}})
	if err != nil {
		t.Fatal(err)
	}
}

func await(t *testing.T, st *memory.Store, id string, want store.JobStatus) *store.Job {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		j, err := st.Job(context.Background(), id)
		if err == nil && j.Status == want {
			return j
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %+v, %v; want %s", id, j, err, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func serve(t *testing.T, ln net.Listener, h http.Handler) {
	t.Helper()
	srv := &http.Server{Handler: h, ReadHeaderTimeout: time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
}

// A job submitted while the gateway is down runs once it is back.
func TestRunOutlivesAGatewayRestart(t *testing.T) {
	st := memory.New(memory.Options{TTL: time.Hour})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close() // the gateway is down
	start(t, st, "http://"+addr, time.Second)
	submit(t, st, "resp_1", "Bearer k")
	j := await(t, st, "resp_1", store.JobQueued)
	for j.Attempts < 1 {
		j = await(t, st, "resp_1", store.JobQueued)
	}
	if !strings.Contains(j.Error, "the gateway did not answer") {
		t.Fatalf("retried job's reason: %q", j.Error)
	}
	ln, err = net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("the port was taken meanwhile: %v", err)
	}
	g := &gateway{jobs: st}
	serve(t, ln, g)
	j = await(t, st, "resp_1", store.JobCompleted)
	if r, _, _ := st.Get(context.Background(), "resp_1"); string(r.Data) != "done" {
		t.Fatalf("record = %q", r.Data)
	}
	if j.Attempts < 2 || g.runs.Load() != 1 {
		t.Fatalf("attempts %d, runs the gateway saw %d", j.Attempts, g.runs.Load())
	}
}

func listen(t *testing.T, g *gateway) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serve(t, ln, g)
	return "http://" + ln.Addr().String()
}

// A refused request fails the job with the gateway's message; a gateway
// that keeps answering 503 fails it after MaxAttempts.
func TestRunFails(t *testing.T) {
	st := memory.New(memory.Options{TTL: time.Hour})
	g := &gateway{jobs: st}
	url := listen(t, g)
	start(t, st, url, time.Second)
	submit(t, st, "resp_bad", "Bearer wrong")
	if j := await(t, st, "resp_bad", store.JobFailed); j.Error != "no credentials" || j.Attempts != 1 {
		t.Fatalf("refused job: %+v", j)
	}
	g.serve = func(w http.ResponseWriter, _ *http.Request, _, _ string) {
		http.Error(w, `{"error":{"message":"no pod"}}`, http.StatusServiceUnavailable)
	}
	submit(t, st, "resp_busy", "Bearer k")
	if j := await(t, st, "resp_busy", store.JobFailed); j.Attempts != 3 || !strings.Contains(j.Error, "gave up after 3 attempts: the gateway answered 503: no pod") {
		t.Fatalf("busy job: %+v", j)
	}
}

// Cancelling a running job stops its run at the next renewal.
func TestCancelStopsTheRun(t *testing.T) {
	st := memory.New(memory.Options{TTL: time.Hour})
	stopped := make(chan error, 1)
	g := &gateway{jobs: st, serve: func(_ http.ResponseWriter, r *http.Request, _, _ string) {
		_, _ = io.Copy(io.Discard, r.Body) // (a server sees the client go once it read the body)
		<-r.Context().Done()
		stopped <- r.Context().Err()
	}}
	start(t, st, listen(t, g), 150*time.Millisecond)
	submit(t, st, "resp_c", "Bearer k")
	await(t, st, "resp_c", store.JobInProgress)
	if _, err := st.Cancel(context.Background(), "resp_c"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-stopped:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("run ended with %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the run went on after its job was cancelled")
	}
	if j := await(t, st, "resp_c", store.JobCancelled); j.Attempts != 1 {
		t.Fatalf("cancelled job ran again: %+v", j)
	}
	if r, _, _ := st.Get(context.Background(), "resp_c"); string(r.Data) != "queued" {
		t.Fatalf("record = %q", r.Data)
	}
}
