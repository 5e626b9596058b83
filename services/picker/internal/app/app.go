// Package app runs the picker service: it wires the endpoint registry
// (etcd), the metrics and event streams (NATS), the scheduling
// configuration and the gRPC PickerService together, reports readiness, and
// shuts everything down in order.
package app

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	pickerv1 "github.com/hermod/hermod/libs/api/hermod/picker/v1"
	"github.com/hermod/hermod/libs/bootstrap"
	"github.com/hermod/hermod/libs/bus"
	"github.com/hermod/hermod/libs/coord"
	_ "github.com/hermod/hermod/libs/plugins/standard" // every plugin type
	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/libs/telemetry"
	"github.com/hermod/hermod/services/picker/internal/endpoints"
	"github.com/hermod/hermod/services/picker/internal/extproc"
	"github.com/hermod/hermod/services/picker/internal/projection"
	"github.com/hermod/hermod/services/picker/internal/schedconfig"
	"github.com/hermod/hermod/services/picker/internal/service"
)

// Config is the picker's configuration (its flags).
type Config struct {
	// Config is the pool, the replica, etcd, NATS and tracing.
	bootstrap.Config
	Listen        string // gRPC
	MetricsListen string // HTTP: /metrics, /health, /ready
	ConfigFile    string // EndpointPickerConfig file; empty = etcd
	ReplayWindow  time.Duration
	Fallbacks     int
	MaxFailures   int
	// IndexerAddress is hermod-indexer's gRPC address, for
	// precise-prefix-cache-scorer; empty: configs using it do not load.
	IndexerAddress string
	// Tokenizer overrides the tokenizer configs name ("builtin": the
	// simulator's); empty: as configured.
	Tokenizer string
	// InflightValkeyURL, when set, is the Valkey/Redis server of the
	// pool's global in-flight counts (valkey-least-request-picker).
	InflightValkeyURL string
	// InflightValkey is its TLS and credentials.
	InflightValkey bootstrap.ValkeySecurity
	// InflightLeaseTTL is how long a pick's count lives without its
	// completion (a gateway that died): then it is repaired.
	InflightLeaseTTL time.Duration
	// LocalView folds only this replica's own decisions and completions:
	// the per-gateway view of in-flight requests a proxy has alone, for
	// comparisons (bench-multi); never for production.
	LocalView bool
	// FilePollInterval is how often the config file is checked for
	// changes.
	FilePollInterval time.Duration
	// ExtProcMaxBodyBytes bounds the request bodies the Envoy ext_proc
	// server buffers (0: extproc.DefaultMaxBodyBytes); larger ones get 413.
	ExtProcMaxBodyBytes int64
	// Ready, when set, is called once the picker is ready (tests).
	Ready func(grpcAddr, metricsAddr string)
}

// Defaults. The listen addresses are loopback, so that a picker started
// by hand serves nobody else; a deployment passes the pod's address (the
// Helm chart does).
const (
	DefaultListen        = "127.0.0.1:9002"
	DefaultMetricsListen = "127.0.0.1:9090"
	DefaultReplayWindow  = 10 * time.Minute
)

// Run runs the picker until ctx ends.
func Run(ctx context.Context, cfg Config, log *slog.Logger) error {
	if cfg.ReplayWindow <= 0 {
		cfg.ReplayWindow = DefaultReplayWindow
	}
	if cfg.FilePollInterval <= 0 {
		cfg.FilePollInterval = time.Second
	}
	boot, err := bootstrap.Start(ctx, bootstrap.Options{Name: "hermod-picker", Config: cfg.Config, Logger: log})
	if err != nil {
		return err
	}
	defer boot.Close()
	cfg.Replica = boot.Replica
	a := &app{cfg: cfg, boot: boot, log: boot.Log, reg: boot.Registry, bgCtx: boot.Context(), firstConfig: make(chan struct{})}
	if err := a.connect(ctx); err != nil {
		return err
	}
	if err := a.start(ctx); err != nil {
		if ctx.Err() != nil {
			return nil // stopped while starting
		}
		return err
	}
	return a.serve(ctx)
}

type app struct {
	cfg  Config
	boot *bootstrap.Service
	log  *slog.Logger
	reg  *prometheus.Registry

	etcd      *clientv3.Client
	nc        *nats.Conn
	js        jetstream.JetStream
	publisher *bus.Publisher
	loader    *schedconfig.Loader
	set       *endpoints.Set
	folder    *projection.Folder
	inflight  *inflightSync
	svc       *service.Server
	extproc   *extproc.Server

	configLoaded, endpointsListed atomic.Bool
	firstConfig                   chan struct{} // closed once the first version is applied
	caughtUp                      atomic.Bool   // the initial replay is done
	following                     atomic.Bool   // the streams are followed
	consumers                     []*bus.Consumer

	// bgCtx is the background work's (boot.Go): it ends at shutdown.
	bgCtx context.Context
}

func (a *app) connect(ctx context.Context) error {
	b, err := a.boot.Connect(ctx)
	if err != nil {
		return err
	}
	a.etcd, a.nc, a.js = b.Etcd, b.NATS, b.JetStream
	a.publisher, err = a.boot.Publisher(a.nc, "decision events")
	return err
}

func (a *app) start(ctx context.Context) error {
	pool := a.cfg.Pool
	schedMetrics := scheduling.NewSchedulerMetrics(a.reg)
	configSubject, err := bus.ConfigSubject(pool)
	if err != nil {
		return err
	}
	services, closeServices, err := a.pluginServices()
	if err != nil {
		return err
	}
	a.boot.OnClose(closeServices)
	inflightOpts, err := a.inflightService()
	if err != nil {
		return err
	}
	services = append(services, inflightOpts...)
	a.loader, err = schedconfig.New(schedconfig.Version{Source: schedconfig.SourceDefault}, schedconfig.Options{
		Pool: pool, Replica: a.cfg.Replica, Logger: a.log, Metrics: a.reg,
		SchedulerOptions: append(services, scheduling.WithLogger(a.log), scheduling.WithMetrics(schedMetrics), scheduling.WithRegisterer(a.reg)),
		OnStatus: func(st *eventsv1.ConfigStatus) {
			if err := bus.PublishCore(a.nc, configSubject, st); err != nil {
				a.log.Warn("publishing the config status failed", "error", err)
			}
		},
		OnApplied: a.reloaded,
	})
	if err != nil {
		return err
	}
	a.boot.OnClose(func() { _ = a.loader.Close() })

	a.set = endpoints.New(endpoints.Options{MaxFailures: a.cfg.MaxFailures, OnRemove: func(name string) {
		a.folder.EndpointRemoved(name)
		lease := a.loader.Acquire()
		lease.Scheduler().EndpointRemoved(name)
		lease.Release()
		a.log.Info("endpoint left the pool", "endpoint", name)
	}})
	a.boot.OnClose(a.set.Close)
	a.folder = projection.New(a.loader, projection.Options{Pool: pool, Replica: a.cfg.Replica, Logger: a.log, Metrics: a.reg,
		Lookup: func(name string) (*scheduling.Endpoint, bool) { return a.set.View().Lookup(name) }, Live: a.caughtUp.Load})
	decisionsSubject, err := bus.DecisionsSubject(pool)
	if err != nil {
		return err
	}
	a.svc = service.New(service.Options{Pool: pool, Replica: a.cfg.Replica, Endpoints: a.set, Loader: a.loader, Folder: a.folder,
		Decisions: a.publisher, Subject: decisionsSubject, Fallbacks: a.cfg.Fallbacks, Logger: a.log,
		Metrics: service.NewMetrics(a.reg, pool, a.set), Ready: a.ready})
	if a.extproc, err = a.newExtProc(); err != nil {
		return err
	}

	if err := a.watchConfig(ctx); err != nil {
		return err
	}
	if err := a.watchEndpoints(ctx); err != nil {
		return err
	}
	if err := a.followMetrics(ctx); err != nil {
		return err
	}
	// Effects apply to the plugins of the config in force: fold the streams
	// only once the pool's config is, or they would feed the default's.
	select {
	case <-a.firstConfig:
	case <-ctx.Done():
		return ctx.Err()
	}
	return a.followStreams(ctx)
}

// watchConfig loads the config from the file or etcd, and follows it.
func (a *app) watchConfig(ctx context.Context) error {
	if a.cfg.ConfigFile != "" {
		w, err := watchFile(ctx, a.cfg.ConfigFile, a.cfg.FilePollInterval, func(data []byte) {
			a.apply(schedconfig.Version{Source: schedconfig.SourceFile, Data: data})
		}, a.log)
		if err != nil {
			return err
		}
		a.boot.OnClose(w.Close)
		return nil
	}
	history := schedconfig.EtcdHistory(a.etcd, a.cfg.Pool)
	w, err := coord.WatchConfig(ctx, a.etcd, a.cfg.Pool, func(v coord.ConfigVersion) {
		if v.Deleted {
			a.log.Info("the pool has no config in etcd; using the default", "key", coord.ConfigKey(a.cfg.Pool))
			a.apply(schedconfig.Version{Source: schedconfig.SourceDefault})
			return
		}
		// An invalid newest version: the newest valid one from the
		// history, not the default, as the other replicas serve.
		a.applied(a.loader.ApplyLatest(ctx, schedconfig.Version{Source: schedconfig.SourceEtcd, Revision: v.Revision, Data: v.Data}, history))
	}, coord.WithLogger(a.log))
	if err != nil {
		return err
	}
	a.boot.OnClose(w.Close)
	return nil
}

func (a *app) apply(v schedconfig.Version) { a.applied(a.loader.Apply(v)) }

// applied follows the loader's Apply or ApplyLatest of a version: the
// first one marks the config loaded, whatever became of it.
func (a *app) applied(err error) {
	if err != nil && !errors.Is(err, schedconfig.ErrUnchanged) && !a.configLoaded.Load() &&
		a.loader.Current().Source == schedconfig.SourceDefault {
		a.log.Error("the first config is invalid: serving with the default config until a valid one arrives")
	}
	if !a.configLoaded.Swap(true) {
		close(a.firstConfig)
	}
}

func (a *app) watchEndpoints(ctx context.Context) error {
	w, err := coord.WatchEndpoints(ctx, a.etcd, a.cfg.Pool, func(s coord.Snapshot) {
		a.set.SetRegistry(s.Revision, s.Endpoints)
		a.syncInflight(s)
		if !a.endpointsListed.Swap(true) {
			a.log.Info("endpoints listed", "endpoints", len(s.Endpoints), "revision", s.Revision)
		}
	}, coord.WithLogger(a.log))
	if err != nil {
		return err
	}
	a.boot.OnClose(w.Close)
	return nil
}

// followMetrics subscribes to the pool's metrics, then seeds the view with
// the latest values of the metrics bucket (older ones lose to newer ones).
func (a *app) followMetrics(ctx context.Context) error {
	filter, err := bus.MetricsFilter(a.cfg.Pool)
	if err != nil {
		return err
	}
	sub, err := bus.Subscribe(a.nc, filter, func(m *eventsv1.PodMetrics, _ string) { a.set.UpdateMetrics(m) },
		bus.WithLogger(a.log), bus.WithRegisterer(a.reg))
	if err != nil {
		return err
	}
	a.boot.OnClose(func() { _ = sub.Close() })
	n, err := seedMetrics(ctx, a.js, a.cfg.Pool, a.set)
	if err != nil {
		a.log.Warn("reading the latest metrics from the bucket failed; waiting for the next scrapes", "error", err)
	} else {
		a.log.Info("metrics seeded from the bucket", "endpoints", n)
	}
	return nil
}

// ready says whether the picker can serve: config loaded, endpoints listed,
// projections caught up with the streams.
func (a *app) ready() error {
	switch {
	case !a.configLoaded.Load():
		return errors.New("no config loaded yet")
	case !a.endpointsListed.Load():
		return errors.New("endpoints not listed yet")
	case !a.caughtUp.Load():
		return errors.New("projections not rebuilt from the streams yet")
	}
	for _, c := range a.consumers {
		select {
		case <-c.Done():
			return errors.New("a stream consumer stopped")
		default:
		}
	}
	return nil
}

func (a *app) serve(ctx context.Context) error {
	gopts, err := a.boot.GRPCServerOptions(grpc.MaxRecvMsgSize(grpcMaxRecv(a.extproc.MaxBodyBytes())))
	if err != nil {
		return err
	}
	gs := grpc.NewServer(gopts...)
	pickerv1.RegisterPickerServiceServer(gs, a.svc)
	// Envoy deployments call the same port (GIE endpoint-picker protocol).
	extprocv3.RegisterExternalProcessorServer(gs, a.extproc)
	hs := health.NewServer()
	healthpb.RegisterHealthServer(gs, hs)
	ops := telemetry.OpsServer(a.boot.Ops(a.debugHandler(telemetry.OpsHandler(a.reg, a.ready))))
	return a.boot.Serve(ctx, bootstrap.Run{
		Servers: []bootstrap.Server{{Name: "grpc", Addr: a.cfg.Listen, GRPC: gs}, {Name: "ops", Addr: a.cfg.MetricsListen, HTTP: ops}},
		// Health follows readiness.
		Ready:          a.ready,
		Health:         hs,
		HealthServices: []string{"", pickerv1.PickerService_ServiceDesc.ServiceName, extprocv3.ExternalProcessor_ServiceDesc.ServiceName},
		OnReady: func(addrs map[string]string) {
			a.log.Info("picker ready", "endpoints", a.set.View().Registered, "candidates", len(a.set.View().Candidates))
			if a.cfg.Ready != nil {
				a.cfg.Ready(addrs["grpc"], addrs["ops"])
			}
		},
	})
}
