package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// DefaultGrace bounds a server's graceful stop.
const DefaultGrace = 10 * time.Second

// readyPoll is how often readiness is checked while serving.
const readyPoll = 100 * time.Millisecond

// Server is one listener of a service: a gRPC or an HTTP server.
type Server struct {
	// Name names the server in logs and in OnReady's addresses ("grpc",
	// "ops", "api").
	Name string
	Addr string
	// GRPC or HTTP: exactly one is set.
	GRPC *grpc.Server
	HTTP *http.Server
	// Grace bounds the graceful stop (default DefaultGrace): requests in
	// flight then are cut.
	Grace time.Duration
}

// Task is work that runs while the service serves; its return ends the
// service (with its error, nil included). Its context ends when the
// service stops.
type Task func(ctx context.Context) error

// Run is what Serve runs.
type Run struct {
	Servers []Server
	Tasks   []Task
	// Ready, when set, is checked while serving: its changes are logged,
	// and Health, when set, follows it for HealthServices ("" is the
	// server as a whole). Without Ready the service is ready once it
	// listens.
	Ready          func() error
	Health         *health.Server
	HealthServices []string
	// OnReady, when set, is called once, when the service is first
	// ready, with the bound address of each server by name (tests).
	OnReady func(addrs map[string]string)
}

// Serve listens on every server's address, runs the servers and tasks
// until ctx ends, a server fails or a task returns, and then stops them:
// health reports NOT_SERVING, each server stops gracefully within its
// grace (then hard), the tasks are canceled and waited for. A server's
// failure is returned; ctx's end is not an error.
func (s *Service) Serve(ctx context.Context, r Run) error {
	listeners := make([]net.Listener, 0, len(r.Servers))
	addrs := make(map[string]string, len(r.Servers))
	attrs := make([]any, 0, 2*len(r.Servers))
	for _, srv := range r.Servers {
		lis, err := net.Listen("tcp", srv.Addr)
		if err != nil {
			for _, l := range listeners {
				_ = l.Close()
			}
			return fmt.Errorf("listen %s (%s): %w", srv.Addr, srv.Name, err)
		}
		listeners = append(listeners, lis)
		addrs[srv.Name] = lis.Addr().String()
		attrs = append(attrs, srv.Name, lis.Addr().String())
	}
	failed := make(chan error, len(r.Servers))
	for i, srv := range r.Servers {
		go func() {
			if err := srv.serve(listeners[i]); err != nil && !errors.Is(err, http.ErrServerClosed) {
				failed <- fmt.Errorf("serve %s: %w", srv.Name, err)
			}
		}()
	}
	tctx, cancelTasks := context.WithCancel(ctx)
	defer cancelTasks()
	ended := make(chan error, len(r.Tasks))
	var tasks sync.WaitGroup
	for _, t := range r.Tasks {
		tasks.Add(1)
		go func() {
			defer tasks.Done()
			ended <- t(tctx)
		}()
	}
	s.Log.Info(s.Name+" serving", attrs...)

	err := s.watch(ctx, r, addrs, failed, ended)
	if r.Health != nil {
		r.Health.Shutdown()
	}
	var stops sync.WaitGroup
	for _, srv := range r.Servers {
		stops.Add(1)
		go func() { defer stops.Done(); s.stop(srv, err != nil) }()
	}
	stops.Wait()
	cancelTasks()
	tasks.Wait()
	if err == nil {
		select {
		case err = <-ended: // a task's own error at its end
			if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				err = nil
			}
		default:
		}
	}
	return err
}

// watch waits for the end, following readiness meanwhile.
func (s *Service) watch(ctx context.Context, r Run, addrs map[string]string, failed, ended <-chan error) error {
	announced := false
	announce := func() {
		if !announced && r.OnReady != nil {
			r.OnReady(addrs)
		}
		announced = true
	}
	var tick <-chan time.Time
	if r.Ready != nil {
		t := time.NewTicker(readyPoll)
		defer t.Stop()
		tick = t.C
		s.setHealth(r, false)
	} else {
		announce()
	}
	serving := false
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-failed:
			return err
		case err := <-ended:
			return err
		case <-tick:
			err := r.Ready()
			if (err == nil) == serving {
				continue
			}
			serving = err == nil
			s.setHealth(r, serving)
			if !serving {
				s.Log.Warn(s.Name+" not ready", "error", err)
				continue
			}
			s.Log.Info(s.Name + " ready")
			announce() // once health says so
		}
	}
}

func (s *Service) setHealth(r Run, serving bool) {
	if r.Health == nil {
		return
	}
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if serving {
		st = healthpb.HealthCheckResponse_SERVING
	}
	for _, name := range r.HealthServices {
		r.Health.SetServingStatus(name, st)
	}
}

func (srv Server) serve(lis net.Listener) error {
	if srv.GRPC != nil {
		return srv.GRPC.Serve(lis)
	}
	if srv.HTTP.TLSConfig != nil { // HTTPS, the certificate from the config
		return srv.HTTP.ServeTLS(lis, "", "")
	}
	return srv.HTTP.Serve(lis)
}

// stop stops a server: hard at once, or gracefully within its grace and
// then hard.
func (s *Service) stop(srv Server, hard bool) {
	grace := srv.Grace
	if grace <= 0 {
		grace = DefaultGrace
	}
	if srv.GRPC != nil {
		if hard {
			srv.GRPC.Stop()
			return
		}
		stopped := make(chan struct{})
		go func() { srv.GRPC.GracefulStop(); close(stopped) }()
		select {
		case <-stopped:
		case <-time.After(grace):
			s.Log.Warn("calls still in flight at shutdown were cut", "server", srv.Name)
			srv.GRPC.Stop()
			<-stopped
		}
		return
	}
	if hard {
		_ = srv.HTTP.Close()
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := srv.HTTP.Shutdown(ctx); err != nil {
		s.Log.Warn("requests still in flight at shutdown were cut", "server", srv.Name, "error", err)
		_ = srv.HTTP.Close()
	}
}
