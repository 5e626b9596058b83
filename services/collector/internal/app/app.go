// Package app runs the metrics collector: it scrapes the endpoints of its
// pool that it owns (replicas split them through etcd membership) and
// publishes their metrics on NATS.
package app

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	registryv1 "github.com/hermod/hermod/libs/api/hermod/registry/v1"
	"github.com/hermod/hermod/libs/bus"
	"github.com/hermod/hermod/libs/coord"
	"github.com/hermod/hermod/libs/telemetry"
	"github.com/hermod/hermod/services/collector/internal/scrape"
)

// Config is the collector's configuration (its flags).
type Config struct {
	Pool           string
	MetricsListen  string
	EtcdEndpoints  []string
	NATSURL        string
	Replica        string
	Interval       time.Duration
	Timeout        time.Duration
	ModelsInterval time.Duration
	KVInterval     time.Duration
	MemberTTL      time.Duration
	OTLPEndpoint   string
	// Ready, when set, is called with the ops address once ready (tests).
	Ready func(opsAddr string)
}

// Defaults.
const (
	DefaultMetricsListen = ":9091"
	DefaultKVInterval    = time.Second
	DefaultMemberTTL     = 10 * time.Second
	// servicePrefix names the membership group of a pool's collector
	// replicas: collector-<pool>.
	servicePrefix = "collector-"
)

// Run runs the collector until ctx ends.
func Run(ctx context.Context, cfg Config, log *slog.Logger) error {
	if err := coord.ValidatePoolName(cfg.Pool); err != nil {
		return fmt.Errorf("--pool: %w", err)
	}
	if cfg.Replica == "" {
		host, _ := os.Hostname()
		cfg.Replica = fmt.Sprintf("%s-%08x", host, rand.Uint32())
	}
	if cfg.KVInterval <= 0 {
		cfg.KVInterval = DefaultKVInterval
	}
	if cfg.MemberTTL <= 0 {
		cfg.MemberTTL = DefaultMemberTTL
	}
	log = log.With("pool", cfg.Pool, "replica", cfg.Replica)
	shutdownTracing, err := telemetry.SetupTracing(ctx, "hermod-collector", cfg.OTLPEndpoint)
	if err != nil {
		return err
	}
	defer func() { _ = shutdownTracing(context.Background()) }()
	reg := telemetry.NewRegistry()

	etcd, err := coord.NewClient(ctx, cfg.EtcdEndpoints)
	if err != nil {
		return err
	}
	defer func() { _ = etcd.Close() }()
	nc, err := bus.Connect(ctx, cfg.NATSURL, "hermod-collector "+cfg.Replica, bus.WithLogger(log))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err = bus.EnsureStreams(sctx, js, bus.DefaultLimits())
	var kv jetstream.KeyValue
	if err == nil {
		kv, err = js.KeyValue(sctx, bus.MetricsBucket)
	}
	cancel()
	if err != nil {
		return err
	}
	sink := newNATSSink(nc, kv, cfg.KVInterval, reg, log)
	scraper, err := scrape.New(scrape.Config{Sink: sink, Interval: cfg.Interval, Timeout: cfg.Timeout, ModelsInterval: cfg.ModelsInterval, Registerer: reg, Logger: log})
	if err != nil {
		return err
	}
	defer scraper.Close()

	own := coord.NewOwnership(cfg.Pool, cfg.Replica, assign(cfg.Pool, scraper, sink, log))
	service := servicePrefix + cfg.Pool
	member, err := coord.Join(ctx, etcd, service, cfg.Replica, cfg.MemberTTL, coord.WithLogger(log))
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = member.Close(cctx)
	}()
	mw, err := coord.WatchMembers(ctx, etcd, service, func(ms []coord.Member) { own.SetMembers(coord.MemberIDs(ms)) }, coord.WithLogger(log))
	if err != nil {
		return err
	}
	defer mw.Close()
	ew, err := coord.WatchEndpoints(ctx, etcd, cfg.Pool, func(s coord.Snapshot) { own.SetEndpoints(s.Sorted()) }, coord.WithLogger(log))
	if err != nil {
		return err
	}
	defer ew.Close()

	lis, err := net.Listen("tcp", cfg.MetricsListen)
	if err != nil {
		return fmt.Errorf("listen %s: %w", cfg.MetricsListen, err)
	}
	srv := &http.Server{Handler: telemetry.OpsHandler(reg, own.Ready), ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(lis) }()
	log.Info("collector serving", "ops", lis.Addr().String(), "interval", cfg.Interval)
	if cfg.Ready != nil {
		cfg.Ready(lis.Addr().String())
	}
	select {
	case <-ctx.Done():
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	}
	sdctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(sdctx)
	return nil
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
