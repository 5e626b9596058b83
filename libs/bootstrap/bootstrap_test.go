package bootstrap

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func start(t *testing.T, o Options) *Service {
	t.Helper()
	if o.Name == "" {
		o.Name = "hermod-test"
	}
	o.Logger = quiet()
	s, err := Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func TestStart(t *testing.T) {
	if _, err := Start(context.Background(), Options{Name: "x", Config: Config{Pool: "a/b"}}); err == nil || !strings.Contains(err.Error(), "--pool") {
		t.Errorf("invalid pool: %v", err)
	}
	if _, err := Start(context.Background(), Options{NoPool: true}); err == nil {
		t.Error("a service without a name started")
	}
	s := start(t, Options{Config: Config{Pool: "p"}})
	if s.Replica == "" || s.Registry == nil || s.Pool != "p" {
		t.Errorf("service %+v", s)
	}
	if a, b := ReplicaID(), ReplicaID(); a == b {
		t.Errorf("replica ids repeat: %s", a)
	}
}

// Close stops the background work first, then undoes the start in
// reverse order, once.
func TestCloseOrder(t *testing.T) {
	s := start(t, Options{NoPool: true})
	var order []string
	s.OnClose(func() { order = append(order, "first") })
	s.OnClose(func() { order = append(order, "second") })
	var bgDone atomic.Bool
	s.Go(func(ctx context.Context) {
		<-ctx.Done()
		time.Sleep(10 * time.Millisecond)
		bgDone.Store(true)
	})
	s.OnClose(func() {
		if !bgDone.Load() {
			order = append(order, "background still running")
		}
	})
	s.Close()
	s.Close()
	if strings.Join(order, ",") != "second,first" {
		t.Errorf("close order %v", order)
	}
}

// A gRPC and an HTTP server serve until the context ends; health follows
// readiness; OnReady gets the addresses once ready; the stop is graceful.
func TestServe(t *testing.T) {
	s := start(t, Options{Config: Config{Pool: "p"}})
	gs := grpc.NewServer()
	hs := health.NewServer()
	healthpb.RegisterHealthServer(gs, hs)
	mux := http.NewServeMux()
	release := make(chan struct{})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, _ *http.Request) { <-release; _, _ = io.WriteString(w, "done") })
	var ready atomic.Bool
	readyAddrs := make(chan map[string]string, 1)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		served <- s.Serve(ctx, Run{
			Servers: []Server{{Name: "grpc", Addr: "127.0.0.1:0", GRPC: gs}, {Name: "ops", Addr: "127.0.0.1:0", HTTP: &http.Server{Handler: mux}}},
			Ready: func() error {
				if !ready.Load() {
					return errors.New("not yet")
				}
				return nil
			},
			Health: hs, HealthServices: []string{""},
			OnReady: func(a map[string]string) { readyAddrs <- a },
		})
	}()
	select {
	case <-readyAddrs:
		t.Fatal("ready before Ready said so")
	case <-time.After(300 * time.Millisecond):
	}
	ready.Store(true)
	addrs := <-readyAddrs
	conn, err := grpc.NewClient(addrs["grpc"], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	resp, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{})
	if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health %v %v", resp, err)
	}
	// A request in flight at the stop is finished.
	got := make(chan string, 1)
	go func() {
		r, err := http.Get("http://" + addrs["ops"] + "/slow")
		if err != nil {
			got <- err.Error()
			return
		}
		b, _ := io.ReadAll(r.Body)
		_ = r.Body.Close()
		got <- string(b)
	}()
	time.Sleep(50 * time.Millisecond)
	cancel()
	time.Sleep(50 * time.Millisecond)
	close(release)
	if b := <-got; b != "done" {
		t.Errorf("request in flight at the stop: %q", b)
	}
	if err := <-served; err != nil {
		t.Errorf("Serve = %v", err)
	}
}

// A task's end ends the service with its error; a port taken is an error
// naming the server.
func TestServeEnds(t *testing.T) {
	s := start(t, Options{NoPool: true})
	boom := errors.New("engine stopped")
	err := s.Serve(context.Background(), Run{
		Servers: []Server{{Name: "ops", Addr: "127.0.0.1:0", HTTP: &http.Server{Handler: http.NotFoundHandler()}}},
		Tasks:   []Task{func(context.Context) error { time.Sleep(20 * time.Millisecond); return boom }},
	})
	if !errors.Is(err, boom) {
		t.Errorf("Serve = %v, want the task's error", err)
	}

	// A task that returns at cancellation with the context's error is no
	// failure.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err = s.Serve(ctx, Run{Tasks: []Task{func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }}})
	if err != nil {
		t.Errorf("Serve at cancellation = %v", err)
	}

	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	err = s.Serve(context.Background(), Run{Servers: []Server{
		{Name: "grpc", Addr: "127.0.0.1:0", GRPC: grpc.NewServer()},
		{Name: "ops", Addr: taken.Addr().String(), HTTP: &http.Server{Handler: http.NotFoundHandler()}},
	}})
	if err == nil || !strings.Contains(err.Error(), "ops") {
		t.Errorf("port taken: %v", err)
	}
}
