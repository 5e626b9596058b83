// Package app runs the metrics collector: it scrapes the endpoints of its
// pool that it owns (replicas split them through etcd membership) and
// publishes their metrics on NATS. With Kubernetes discovery, one replica
// also writes the pool's Ready pods, picked by a label selector or by an
// InferencePool, into the endpoint registry (kubediscovery); with an
// endpoints file, named by --endpoints-file or by the pool's config (a
// file-discovery plugin in dataLayer.discovery), one replica keeps the
// file's endpoints registered (filediscovery).
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	registryv1 "github.com/hermod/hermod/libs/api/hermod/registry/v1"
	"github.com/hermod/hermod/libs/bootstrap"
	"github.com/hermod/hermod/libs/bus"
	"github.com/hermod/hermod/libs/coord"
	"github.com/hermod/hermod/libs/telemetry"
	"github.com/hermod/hermod/services/collector/internal/filediscovery"
	"github.com/hermod/hermod/services/collector/internal/kubediscovery"
	"github.com/hermod/hermod/services/collector/internal/scrape"
)

// Config is the collector's configuration (its flags).
type Config struct {
	// Config is the pool, the replica, etcd, NATS and tracing.
	bootstrap.Config
	MetricsListen  string
	Interval       time.Duration
	Timeout        time.Duration
	ModelsInterval time.Duration
	KVInterval     time.Duration
	MemberTTL      time.Duration

	// PoolSet says that --pool was given (flag or environment) rather
	// than left at its default; with InferencePool, an unset pool is the
	// InferencePool's name.
	PoolSet bool

	// Discovery is where endpoints come from besides their own
	// registration: DiscoveryNone, or DiscoveryKubernetes (Ready pods by
	// label selector or InferencePool, written into the registry by one
	// replica).
	Discovery string
	// Kubeconfig is the kubeconfig of Kubernetes discovery; empty: the
	// in-cluster service account.
	Kubeconfig string
	// DiscoveryNamespace is the namespace of the pods; empty: the
	// kubeconfig context's, or in a cluster the collector's own.
	DiscoveryNamespace string
	// DiscoverySelector is the pods' label selector (required).
	DiscoverySelector string
	// DiscoveryTargetPort is the port of the pods' HTTP API (not used with
	// InferencePool).
	DiscoveryTargetPort int
	// InferencePool, when set, is the InferencePool of DiscoveryNamespace
	// whose selector and target ports pick the pods, instead of
	// DiscoverySelector and DiscoveryTargetPort; it turns Kubernetes
	// discovery on, and its name is the pool (--pool, if given, must be
	// the same).
	InferencePool string
	// DiscoveryResync is the period of the full resync of the pods with
	// the registry (kubediscovery.DefaultResync when zero).
	DiscoveryResync time.Duration
	// KubeClient and DynamicClient, when set, are the Kubernetes clients
	// of discovery instead of ones built from Kubeconfig (tests).
	KubeClient    kubernetes.Interface
	DynamicClient dynamic.Interface

	// EndpointsFile, when set, is a YAML or JSON file of endpoints Hermod
	// did not start, which one replica keeps registered (filediscovery).
	// It works beside Discovery. Without it, the file the pool's config
	// names (a file-discovery plugin in dataLayer.discovery) is followed;
	// with it, that one is not (a warning says so when they differ).
	EndpointsFile string
	// EndpointsFileInterval is the period of the file's polls
	// (filediscovery.DefaultInterval when zero), the flag's or the
	// config's (with watchFile: true).
	EndpointsFileInterval time.Duration

	// Ready, when set, is called with the ops address once ready (tests).
	Ready func(opsAddr string)
}

// The values of Config.Discovery.
const (
	DiscoveryNone       = "none"
	DiscoveryKubernetes = "kubernetes"
)

// Defaults.
const (
	DefaultMetricsListen = "127.0.0.1:9091"
	DefaultKVInterval    = time.Second
	DefaultMemberTTL     = 10 * time.Second
	// DefaultDiscoveryTargetPort is vLLM's default HTTP port.
	DefaultDiscoveryTargetPort = 8000
	// servicePrefix names the membership group of a pool's collector
	// replicas: collector-<pool>.
	servicePrefix = "collector-"
)

// Run runs the collector until ctx ends.
func Run(ctx context.Context, cfg Config, log *slog.Logger) error {
	if cfg.KVInterval <= 0 {
		cfg.KVInterval = DefaultKVInterval
	}
	if cfg.MemberTTL <= 0 {
		cfg.MemberTTL = DefaultMemberTTL
	}
	if err := cfg.poolOfInferencePool(); err != nil {
		return err
	}
	discovery, err := cfg.discovery()
	if err != nil {
		return err
	}
	if cfg.EndpointsFileInterval < 0 {
		return fmt.Errorf("--endpoints-file-interval: %s is negative", cfg.EndpointsFileInterval)
	}
	svc, err := bootstrap.Start(ctx, bootstrap.Options{Name: "hermod-collector", Config: cfg.Config, Logger: log})
	if err != nil {
		return err
	}
	defer svc.Close()
	cfg.Replica, log = svc.Replica, svc.Log
	b, err := svc.Connect(ctx)
	if err != nil {
		return err
	}
	etcd, nc, js := b.Etcd, b.NATS, b.JetStream
	kctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	kv, err := bus.Lookup(kctx, func(ctx context.Context) (jetstream.KeyValue, error) { return js.KeyValue(ctx, bus.MetricsBucket) })
	cancel()
	if err != nil {
		return fmt.Errorf("bucket %s: %w", bus.MetricsBucket, err)
	}
	sink := newNATSSink(nc, kv, cfg.KVInterval, svc.Registry, log)
	scraper, err := scrape.New(scrape.Config{Sink: sink, Interval: cfg.Interval, Timeout: cfg.Timeout, ModelsInterval: cfg.ModelsInterval, Registerer: svc.Registry, Logger: log})
	if err != nil {
		return err
	}
	data := newDataLayer(scraper, log)
	// The endpoints file the pool's config names, unless the flag names
	// one; started once the first version is in.
	data.files = newConfigFiles(cfg.EndpointsFile, func(path string, hostNames bool) error { return filediscovery.Check(cfg.Pool, path, hostNames) },
		startFileDiscovery(ctx, filediscovery.Config{
			Pool: cfg.Pool, Interval: cfg.EndpointsFileInterval,
			Etcd: etcd, ID: cfg.Replica, LeaseTTL: cfg.MemberTTL, Registerer: svc.Registry, Logger: log,
		}), log)
	svc.OnClose(func() {
		scraper.Close()
		data.close() // once no poll uses its sources
		data.files.close()
	})
	// The pool's config says how served models are polled; follow it from
	// the first version on, before any endpoint is polled.
	cw, err := coord.WatchConfig(ctx, etcd, cfg.Pool, data.apply, coord.WithLogger(log))
	if err != nil {
		return err
	}
	svc.OnClose(cw.Close)
	select {
	case <-data.first:
	case <-ctx.Done():
		return nil
	}
	own, err := coord.Share(ctx, etcd, coord.ShareOptions{Pool: cfg.Pool, Group: servicePrefix + cfg.Pool, Replica: cfg.Replica, TTL: cfg.MemberTTL,
		Assign: assign(cfg.Pool, scraper, sink, log)}, coord.WithLogger(log))
	if err != nil {
		return err
	}
	svc.OnClose(own.Close)
	if discovery != nil {
		discovery.Etcd, discovery.Registerer, discovery.Logger = etcd, svc.Registry, log
		src, err := kubediscovery.Start(ctx, *discovery)
		if err != nil {
			return err
		}
		svc.OnClose(src.Close)
	}
	if cfg.EndpointsFile != "" {
		src, err := filediscovery.Start(ctx, filediscovery.Config{
			Pool: cfg.Pool, Path: cfg.EndpointsFile, Interval: cfg.EndpointsFileInterval,
			Etcd: etcd, ID: cfg.Replica, LeaseTTL: cfg.MemberTTL, Registerer: svc.Registry, Logger: log,
		})
		if err != nil {
			return fmt.Errorf("--endpoints-file: %w", err)
		}
		svc.OnClose(src.Close)
	} else {
		// A collector does not start with a bad file the config names,
		// as with the flag's; later versions are followed as they come.
		if err := data.files.sync(); err != nil {
			return err
		}
		interval := cfg.EndpointsFileInterval
		if interval <= 0 {
			interval = filediscovery.DefaultInterval
		}
		svc.Go(func(ctx context.Context) { data.files.run(ctx, interval) })
	}
	log.Info("collector scraping", "interval", cfg.Interval)
	return svc.Serve(ctx, bootstrap.Run{
		Servers: []bootstrap.Server{{Name: "ops", Addr: cfg.MetricsListen, HTTP: telemetry.OpsServer(svc.Ops(telemetry.OpsHandler(svc.Registry, own.Ready)))}},
		OnReady: func(addrs map[string]string) {
			if cfg.Ready != nil {
				cfg.Ready(addrs["ops"])
			}
		},
	})
}

// assign hands this replica's endpoints to the scraper and forgets the
// latest metrics of the others.
func assign(pool string, scraper *scrape.Scraper, sink *natsSink, log *slog.Logger) func([]*registryv1.Endpoint) {
	return func(mine []*registryv1.Endpoint) {
		keep := map[string]bool{}
		for _, ep := range mine {
			if s, err := bus.MetricsSubject(pool, ep.GetName()); err == nil {
				keep[s] = true
			}
		}
		scraper.SetEndpoints(mine)
		sink.forget(keep)
		log.Debug("endpoints assigned", "mine", len(mine))
	}
}

// discoveryFlags names the flag of each kubediscovery.Config field a user
// sets.
var discoveryFlags = map[string]string{
	"Pool":          "--pool",
	"Namespace":     "--discovery-namespace",
	"Selector":      "--discovery-selector",
	"TargetPort":    "--discovery-target-port",
	"InferencePool": "--inference-pool",
	"Resync":        "--discovery-resync",
}

// poolOfInferencePool makes the InferencePool's name the pool: --pool left
// at its default takes it, a --pool given must equal it.
func (cfg *Config) poolOfInferencePool() error {
	switch {
	case cfg.InferencePool == "":
	case !cfg.PoolSet:
		cfg.Pool = cfg.InferencePool
	case cfg.Pool != cfg.InferencePool:
		return fmt.Errorf("--pool: %q is not the --inference-pool %q, whose name is the pool (leave --pool out, or give the same name)",
			cfg.Pool, cfg.InferencePool)
	}
	return nil
}

// discovery returns the checked configuration of Kubernetes discovery (its
// Etcd, Registerer and Logger unset), nil when discovery is off. Errors name
// the flags.
func (cfg Config) discovery() (*kubediscovery.Config, error) {
	switch cfg.Discovery {
	case "", DiscoveryNone:
		if cfg.InferencePool == "" {
			return nil, nil
		}
	case DiscoveryKubernetes:
	default:
		return nil, fmt.Errorf("--discovery: %q is not a discovery source (%s or %s)", cfg.Discovery, DiscoveryNone, DiscoveryKubernetes)
	}
	dc := kubediscovery.Config{
		Pool:       cfg.Pool,
		Namespace:  cfg.DiscoveryNamespace,
		Selector:   cfg.DiscoverySelector,
		TargetPort: cfg.DiscoveryTargetPort,
		Resync:     cfg.DiscoveryResync,
		Kube:       cfg.KubeClient,
		ID:         cfg.Replica,
		LeaseTTL:   cfg.MemberTTL,
	}
	if cfg.InferencePool != "" {
		// The pool's targetPorts are the ports: the flag's default does
		// not apply.
		dc.InferencePool, dc.TargetPort, dc.Dynamic = cfg.InferencePool, 0, cfg.DynamicClient
	}
	// Check the flags before the kubeconfig, which fills in a namespace.
	if err := flagErrors(withNamespace(dc).Validate()); err != nil {
		return nil, err
	}
	if dc.Kube == nil || (dc.InferencePool != "" && dc.Dynamic == nil) {
		rc, ns, err := kubediscovery.RESTConfig(cfg.Kubeconfig)
		if err != nil {
			if cfg.Kubeconfig == "" {
				return nil, fmt.Errorf("--discovery=%s without --kubeconfig: %w", DiscoveryKubernetes, err)
			}
			return nil, fmt.Errorf("--kubeconfig: %w", err)
		}
		kube, dyn, err := kubediscovery.NewClientsForConfig(rc)
		if err != nil {
			return nil, err
		}
		if dc.Kube == nil {
			dc.Kube = kube
		}
		if dc.InferencePool != "" && dc.Dynamic == nil {
			dc.Dynamic = dyn
		}
		if dc.Namespace == "" {
			dc.Namespace = ns
		}
	}
	if dc.Namespace == "" {
		return nil, errors.New("--discovery-namespace: not set, and the kubeconfig or cluster gives no namespace")
	}
	if err := flagErrors(dc.Validate()); err != nil {
		return nil, err
	}
	return &dc, nil
}

// withNamespace returns dc with a placeholder namespace when it has none
// yet, so that Validate checks the other fields.
func withNamespace(dc kubediscovery.Config) kubediscovery.Config {
	if dc.Namespace == "" {
		dc.Namespace = "placeholder"
	}
	return dc
}

// flagErrors turns the *kubediscovery.FieldError in err into errors that
// name the flag.
func flagErrors(err error) error {
	if err == nil {
		return nil
	}
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else {
		errs = []error{err}
	}
	out := make([]error, 0, len(errs))
	for _, e := range errs {
		var fe *kubediscovery.FieldError
		if errors.As(e, &fe) {
			if name, ok := discoveryFlags[fe.Field]; ok {
				e = fmt.Errorf("%s: %w", name, fe.Err)
			}
		}
		out = append(out, e)
	}
	return errors.Join(out...)
}
