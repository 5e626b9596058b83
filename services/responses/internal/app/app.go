// Package app runs the responses service: the store its configuration
// selects, served over gRPC, with /metrics, /health and /ready.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"sigs.k8s.io/yaml"

	responsesv1 "github.com/hermod/hermod/libs/api/hermod/responses/v1"
	"github.com/hermod/hermod/libs/bootstrap"
	"github.com/hermod/hermod/libs/coord"
	"github.com/hermod/hermod/libs/plugins/responsestore"
	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/libs/telemetry"
	"github.com/hermod/hermod/libs/tlsconfig"
	"github.com/hermod/hermod/services/responses/internal/background"
	"github.com/hermod/hermod/services/responses/internal/memory"
	"github.com/hermod/hermod/services/responses/internal/service"
	"github.com/hermod/hermod/services/responses/internal/store"
	"github.com/hermod/hermod/services/responses/internal/tiered"
)

// Defaults of the service's addresses.
const (
	DefaultListen        = "127.0.0.1:9097"
	DefaultMetricsListen = "127.0.0.1:9098"
)

// Config is the service's configuration.
type Config struct {
	// Config is the pool, the replica, etcd and tracing. Its Pool and
	// EtcdEndpoints locate the pool's EndpointPickerConfig, whose
	// responses-store plugin gives the storeConfig (no etcd: the flag or
	// the default).
	bootstrap.Config
	Listen, MetricsListen string
	// StoreConfig is a storeConfig object (YAML or JSON, or @file); it
	// wins over the pool's EndpointPickerConfig.
	StoreConfig string
	ChainLimit  int
	// GatewayURL is where background responses are run (empty: they are
	// refused); BackgroundWorkers how many run at once.
	GatewayURL string
	// GatewayCAFile is the PEM CA an https GatewayURL is verified with
	// (empty: the system roots).
	GatewayCAFile     string
	BackgroundWorkers int
}

// Run serves until ctx ends.
func Run(ctx context.Context, cfg Config, log *slog.Logger) error {
	svc, err := bootstrap.Start(ctx, bootstrap.Options{Name: "hermod-responses", Config: cfg.Config, Logger: log})
	if err != nil {
		return err
	}
	defer svc.Close()
	cfg.Replica, log = svc.Replica, svc.Log
	sc, source, err := resolveStoreConfig(ctx, svc, cfg)
	if err != nil {
		return err
	}
	st, err := Open(ctx, sc, cfg.Replica, log, svc.Registry)
	if err != nil {
		return err
	}
	svc.OnClose(func() { _ = st.Close() })
	log.Info("responses store", "backend", backendName(sc), "from", source)

	rs := service.New(st, cfg.ChainLimit)
	svc.Registry.MustRegister(rs.Collectors()...)
	if cfg.GatewayURL != "" {
		client, err := gatewayClient(cfg.GatewayCAFile)
		if err != nil {
			return err
		}
		runner := background.New(background.Options{Jobs: st, GatewayURL: cfg.GatewayURL, Client: client, Workers: cfg.BackgroundWorkers, Log: log})
		svc.Registry.MustRegister(runner.Collectors()...)
		rs.RunBackground(runner.Wake)
		svc.Go(runner.Run)
		log.Info("background responses", "gateway", cfg.GatewayURL, "workers", cfg.BackgroundWorkers)
	}
	gopts, err := svc.GRPCServerOptions()
	if err != nil {
		return err
	}
	gs := grpc.NewServer(gopts...)
	responsesv1.RegisterResponsesStoreServer(gs, rs)
	hs := health.NewServer()
	healthpb.RegisterHealthServer(gs, hs)
	ops := telemetry.OpsServer(svc.Ops(telemetry.OpsHandler(svc.Registry, func() error { return nil })))
	return svc.Serve(ctx, bootstrap.Run{
		Servers:        []bootstrap.Server{{Name: "grpc", Addr: cfg.Listen, GRPC: gs}, {Name: "ops", Addr: cfg.MetricsListen, HTTP: ops}},
		Ready:          func() error { return nil },
		Health:         hs,
		HealthServices: []string{"", responsesv1.ResponsesStore_ServiceDesc.ServiceName},
	})
}

func backendName(sc *responsestore.StoreConfig) string {
	switch {
	case sc.TieredConfig == nil:
		return "memory"
	case sc.TieredConfig.Mongo == nil:
		return "redis (" + string(sc.TieredConfig.Redis.Mode()) + ")"
	default:
		return "redis (" + string(sc.TieredConfig.Redis.Mode()) + ") + mongodb"
	}
}

// Open builds the store a storeConfig selects, its metrics registered
// with reg (nil: none).
func Open(ctx context.Context, sc *responsestore.StoreConfig, replica string, log *slog.Logger, reg prometheus.Registerer) (store.Backend, error) {
	if sc.TieredConfig == nil {
		m := sc.InMemoryConfig
		return memory.New(memory.Options{TTL: m.TTL.Std(), MaxEntries: m.MaxEntries, MaxEntryBytes: m.MaxEntryBytes}), nil
	}
	metrics := tiered.NewMetrics()
	if reg != nil {
		for _, c := range metrics.Collectors() {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return tiered.New(ctx, sc.TieredConfig, tiered.Options{Consumer: replica, Log: log, Metrics: metrics})
}

// resolveStoreConfig: the flag, else the pool's EndpointPickerConfig in
// etcd, else memory with a 24h ttl.
func resolveStoreConfig(ctx context.Context, svc *bootstrap.Service, cfg Config) (*responsestore.StoreConfig, string, error) {
	log := svc.Log
	if cfg.StoreConfig != "" {
		data := []byte(cfg.StoreConfig)
		if name, ok := strings.CutPrefix(cfg.StoreConfig, "@"); ok {
			b, err := os.ReadFile(name)
			if err != nil {
				return nil, "", fmt.Errorf("--store-config: %w", err)
			}
			data = b
		}
		js, err := yaml.YAMLToJSON(data)
		if err != nil {
			return nil, "", fmt.Errorf("--store-config: %w", err)
		}
		sc, err := responsestore.ParseStoreConfig(js, warnFunc(log))
		if err != nil {
			return nil, "", fmt.Errorf("--store-config: %w", err)
		}
		return sc, "--store-config", nil
	}
	if len(cfg.EtcdEndpoints) == 0 {
		return responsestore.Default(), "default", nil
	}
	cli, err := svc.Etcd(ctx)
	if err != nil {
		return nil, "", err
	}
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	v, err := coord.GetConfig(cctx, cli, cfg.Pool)
	if errors.Is(err, coord.ErrNoConfig) {
		return responsestore.Default(), "default (pool " + cfg.Pool + " has no config)", nil
	}
	if err != nil {
		return nil, "", err
	}
	pc, err := scheduling.ParseConfig(v.Data)
	if err != nil {
		return nil, "", fmt.Errorf("pool %s config: %w", cfg.Pool, err)
	}
	raw, ok := responsestore.FromConfig(pc)
	if !ok {
		return responsestore.Default(), "default (pool " + cfg.Pool + "'s config has no responses-store plugin)", nil
	}
	gated := false
	for _, g := range pc.FeatureGates {
		gated = gated || (g.Name == scheduling.GatePrepareDataPlugins && g.Enabled)
	}
	if !gated {
		log.Warn("the pool's responses-store plugin is used, but its config lacks featureGates: [prepareDataPlugins] (pickers skip it)")
	}
	sc, err := responsestore.ParseParams(raw, warnFunc(log))
	if err != nil {
		return nil, "", fmt.Errorf("pool %s config: plugins (responses-store): %w", cfg.Pool, err)
	}
	return sc, fmt.Sprintf("pool %s config (revision %d)", cfg.Pool, v.Revision), nil
}

func warnFunc(log *slog.Logger) func(string) {
	return func(msg string) { log.Warn("responses-store config: " + msg) }
}

// gatewayClient is the background runs' client: nil (the runner's own)
// unless the gateway's CA is given, when it verifies the gateway's
// certificate with it.
func gatewayClient(caFile string) (*http.Client, error) {
	if caFile == "" {
		return nil, nil
	}
	cfg, err := tlsconfig.ClientFiles{CAFile: caFile}.Config()
	if err != nil {
		return nil, fmt.Errorf("--gateway-ca-file: %w", err)
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = cfg
	return &http.Client{Transport: t}, nil
}
