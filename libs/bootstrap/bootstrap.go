// Package bootstrap starts and stops a Hermod service the one way every
// service does, in the spirit of Caddy's module lifecycle: Start
// provisions what every service has (its identity, logger, Prometheus
// registry and tracing), the service provisions the connections it needs
// through it (etcd, NATS, JetStream, a publisher), Serve runs its servers
// and tasks until the context ends, and Close cleans everything up in
// reverse order. A connection opened here is closed here: the services
// do not repeat any of it.
package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hermod/hermod/libs/coord"
	"github.com/hermod/hermod/libs/secret"
	"github.com/hermod/hermod/libs/telemetry"
)

// Options say what a service is.
type Options struct {
	// Name is the program's name ("hermod-picker"): tracing's service
	// name, and the NATS connection's name with the replica.
	Name string
	// Config is what the service was told; its Pool must be a valid pool
	// name unless NoPool is set.
	Config
	NoPool bool
	// Logger is the program's logger (default slog.Default()).
	Logger *slog.Logger
}

// Service is a started service: what it is, its logger (with the pool and
// the replica), its registry, and what Close undoes.
type Service struct {
	Name, Pool, Replica string
	Log                 *slog.Logger
	Registry            *prometheus.Registry

	config   Config
	opsToken string
	grpc     grpcSecurity

	mu       sync.Mutex
	cleanups []func()

	bgCtx    context.Context
	bgCancel context.CancelFunc
	bg       sync.WaitGroup
}

// Start provisions a service. On error nothing is left running.
func Start(ctx context.Context, o Options) (*Service, error) {
	if !o.NoPool {
		if err := coord.ValidatePoolName(o.Pool); err != nil {
			return nil, fmt.Errorf("--pool: %w", err)
		}
	}
	if o.Name == "" {
		return nil, errors.New("bootstrap: a service needs a name")
	}
	if o.Replica == "" {
		o.Replica = ReplicaID()
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	log := o.Logger.With("replica", o.Replica)
	if !o.NoPool {
		log = o.Logger.With("pool", o.Pool, "replica", o.Replica)
	}
	opsToken, _, err := secret.Source{What: "ops token", File: o.OpsTokenFile, FileSetting: "--ops-token-file", Env: "HERMOD_OPS_TOKEN"}.Lookup()
	if err != nil {
		return nil, err
	}
	s := &Service{Name: o.Name, Pool: o.Pool, Replica: o.Replica, Log: log, Registry: telemetry.NewRegistry(), config: o.Config, opsToken: opsToken}
	s.bgCtx, s.bgCancel = context.WithCancel(context.WithoutCancel(ctx))
	if err := s.setupGRPC(o.GRPC); err != nil {
		s.Close()
		return nil, err
	}
	shutdownTracing, err := telemetry.SetupTracing(ctx, o.Name, o.OTLPEndpoint)
	if err != nil {
		s.Close()
		return nil, err
	}
	s.OnClose(func() { _ = shutdownTracing(context.Background()) })
	return s, nil
}

// Ops guards an ops handler (/metrics, /debug/) with the service's ops
// token, if it has one; /health and /ready stay open.
func (s *Service) Ops(h http.Handler) http.Handler { return telemetry.RequireBearer(s.opsToken, h) }

// ReplicaID names a process: its host name and a random suffix (a
// restarted process is a new replica).
func ReplicaID() string {
	host, _ := os.Hostname()
	if host == "" {
		host = "hermod"
	}
	return fmt.Sprintf("%s-%08x", host, rand.Uint32())
}

// OnClose registers f to run at Close, after everything registered later.
func (s *Service) OnClose(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cleanups = append(s.cleanups, f)
}

// Go runs f in the background under a context Close cancels; Close waits
// for it before it closes the connections f may use.
func (s *Service) Go(f func(ctx context.Context)) {
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		f(s.bgCtx)
	}()
}

// Context is the background work's context: it ends when Close begins.
func (s *Service) Context() context.Context { return s.bgCtx }

// Close stops the background work, then undoes the start in reverse
// order. It is safe to call more than once.
func (s *Service) Close() {
	s.bgCancel()
	s.bg.Wait()
	s.mu.Lock()
	cleanups := s.cleanups
	s.cleanups = nil
	s.mu.Unlock()
	for i := len(cleanups) - 1; i >= 0; i-- {
		cleanups[i]()
	}
}
