// Package app runs the KV-event indexer: it ingests the KV-cache events of
// the pool's endpoints it owns (replicas split them through etcd
// membership) into the HERMOD_KV stream, projects the whole stream into
// its block index, and answers Score and Lookup over gRPC.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/grpc"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	indexerv1 "github.com/hermod/hermod/libs/api/hermod/indexer/v1"
	registryv1 "github.com/hermod/hermod/libs/api/hermod/registry/v1"
	"github.com/hermod/hermod/libs/bus"
	"github.com/hermod/hermod/libs/coord"
	"github.com/hermod/hermod/libs/kv/index"
	"github.com/hermod/hermod/libs/telemetry"
	"github.com/hermod/hermod/services/indexer/internal/ingest"
	"github.com/hermod/hermod/services/indexer/internal/service"
)

// Config is the indexer's configuration (its flags).
type Config struct {
	Pool          string
	GRPCListen    string
	MetricsListen string
	EtcdEndpoints []string
	NATSURL       string
	Replica       string
	MemberTTL     time.Duration
	// Index bounds the in-memory index, and keys blocks.
	Index index.Config
	// SharedIndexURL, when set, keeps the index in this Valkey/Redis
	// server, shared by the pool's replicas (redisConfig/valkeyConfig),
	// instead of one in-memory copy per replica.
	SharedIndexURL string
	// LogInterval, when positive, logs the index's figures this often
	// (metricsLoggingInterval).
	LogInterval time.Duration
	// ZMQBind, when set, binds a SUB socket there for pods that connect
	// to the indexer (centralized mode, e.g. tcp://*:5557).
	ZMQBind string
	// SnapshotInterval is how often this replica snapshots its index into
	// the object store (0: never).
	SnapshotInterval time.Duration
	OTLPEndpoint     string
	// Ready, when set, is called with the gRPC and ops addresses once the
	// indexer serves (tests).
	Ready func(grpcAddr, opsAddr string)
}

// Defaults.
const (
	DefaultGRPCListen       = ":9095"
	DefaultMetricsListen    = ":9096"
	DefaultMemberTTL        = 10 * time.Second
	DefaultSnapshotInterval = 5 * time.Minute
	// servicePrefix names the membership group of a pool's indexer
	// replicas: indexer-<pool>.
	servicePrefix = "indexer-"
	// catchUpTimeout bounds the wait for the projection to reach the end
	// of the stream before ingest starts.
	catchUpTimeout = 2 * time.Minute
)

// Run runs the indexer until ctx ends.
func Run(ctx context.Context, cfg Config, log *slog.Logger) error {
	if err := coord.ValidatePoolName(cfg.Pool); err != nil {
		return fmt.Errorf("--pool: %w", err)
	}
	if cfg.Replica == "" {
		host, _ := os.Hostname()
		cfg.Replica = fmt.Sprintf("%s-%08x", host, rand.Uint32())
	}
	if cfg.MemberTTL <= 0 {
		cfg.MemberTTL = DefaultMemberTTL
	}
	log = log.With("pool", cfg.Pool, "replica", cfg.Replica)
	shutdownTracing, err := telemetry.SetupTracing(ctx, "hermod-indexer", cfg.OTLPEndpoint)
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
	nc, err := bus.Connect(ctx, cfg.NATSURL, "hermod-indexer "+cfg.Replica, bus.WithLogger(log))
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
	cancel()
	if err != nil {
		return err
	}
	pub, err := bus.NewPublisher(nc, bus.WithLogger(log), bus.WithRegisterer(reg))
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = pub.Close(cctx)
	}()

	// The projection first (ingest resumes each pod after its last batch
	// on the stream, so it waits until the projection has caught up).
	var proj projected
	var restoredAt uint64
	var specIdx *index.Index
	caughtUp := make(chan struct{})
	if cfg.SharedIndexURL != "" {
		shared, closeShared, err := openShared(ctx, cfg, reg, log)
		if err != nil {
			return err
		}
		defer closeShared()
		proj, specIdx = shared, shared.Speculation()
		fctx, stopFollowing := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); followShared(fctx, js, cfg.Pool, shared, caughtUp, log) }()
		defer func() { stopFollowing(); <-done }()
	} else {
		p, restored, stop, err := followLocal(ctx, js, cfg, reg, caughtUp, log)
		if err != nil {
			return err
		}
		defer stop()
		proj, specIdx, restoredAt = p, p.Index(), restored
	}
	select {
	case <-caughtUp:
	case <-ctx.Done():
		return nil
	case <-time.After(catchUpTimeout):
		return fmt.Errorf("the projection did not catch up with the KV stream within %v", catchUpTimeout)
	}
	log.Info("index caught up with the stream", "stream_sequence", proj.StreamSequence(), "restored_at", restoredAt, "shared", cfg.SharedIndexURL != "")
	spec, err := followSpeculation(ctx, js, cfg.Pool, specIdx, reg, log)
	if err != nil {
		return err
	}
	defer spec.Close()
	if cfg.LogInterval > 0 {
		lctx, stopLogging := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); logIndex(lctx, proj, cfg.LogInterval, log) }()
		defer func() { stopLogging(); <-done }()
	}

	mg, err := ingest.NewManager(ingest.Config{Pool: cfg.Pool, Replica: cfg.Replica, Sink: &streamSink{pub: pub, log: log}, Logger: log, Registerer: reg})
	if err != nil {
		return err
	}
	defer mg.Close()
	own := coord.NewOwnership(cfg.Pool, cfg.Replica, func(mine []*registryv1.Endpoint) { mg.SetTargets(targets(mine, proj)) })
	group := servicePrefix + cfg.Pool
	member, err := coord.Join(ctx, etcd, group, cfg.Replica, cfg.MemberTTL, coord.WithLogger(log))
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = member.Close(cctx)
	}()
	mw, err := coord.WatchMembers(ctx, etcd, group, func(ms []coord.Member) { own.SetMembers(coord.MemberIDs(ms)) }, coord.WithLogger(log))
	if err != nil {
		return err
	}
	defer mw.Close()
	var central *ingest.Central
	if cfg.ZMQBind != "" {
		central = mg.NewCentral(cfg.ZMQBind, ingest.DefaultTopicPrefix)
		cctx, stopCentral := context.WithCancel(ctx)
		done, bound := make(chan error, 1), make(chan error, 1)
		go func() { done <- central.Run(cctx, bound) }()
		if err := <-bound; err != nil {
			stopCentral()
			return fmt.Errorf("--zmq-bind: %w", errors.Join(err, <-done))
		}
		defer func() {
			stopCentral()
			if err := <-done; err != nil {
				log.Warn("centralized ingest stopped with an error", "error", err)
			}
		}()
	}
	ew, err := coord.WatchEndpoints(ctx, etcd, cfg.Pool, func(s coord.Snapshot) {
		eps := s.Sorted()
		own.SetEndpoints(eps)
		if central != nil {
			ts, addrs := centralPods(eps, proj)
			central.SetPods(ts, addrs)
		}
	}, coord.WithLogger(log))
	if err != nil {
		return err
	}
	defer ew.Close()

	glis, err := net.Listen("tcp", cfg.GRPCListen)
	if err != nil {
		return fmt.Errorf("listen %s: %w", cfg.GRPCListen, err)
	}
	gsrv := grpc.NewServer(telemetry.GRPCServerOptions()...)
	indexerv1.RegisterIndexerServiceServer(gsrv, service.New(cfg.Pool, proj))
	lis, err := net.Listen("tcp", cfg.MetricsListen)
	if err != nil {
		_ = glis.Close()
		return fmt.Errorf("listen %s: %w", cfg.MetricsListen, err)
	}
	ready := func() error {
		select {
		case <-caughtUp:
		default:
			return errors.New("the index has not caught up with the stream")
		}
		return own.Ready()
	}
	srv := &http.Server{Handler: debugHandler(telemetry.OpsHandler(reg, ready), proj, restoredAt), ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 2)
	go func() { errc <- gsrv.Serve(glis) }()
	go func() { errc <- srv.Serve(lis) }()
	log.Info("indexer serving", "grpc", glis.Addr().String(), "ops", lis.Addr().String())
	if cfg.Ready != nil {
		cfg.Ready(glis.Addr().String(), lis.Addr().String())
	}
	var serveErr error
	select {
	case <-ctx.Done():
	case err := <-errc:
		serveErr = fmt.Errorf("serve: %w", err)
	}
	gsrv.GracefulStop()
	sdctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(sdctx)
	return serveErr
}

// targets are the owned endpoints that publish KV events, each resuming
// after its last batch on the stream.
func targets(mine []*registryv1.Endpoint, proj projected) []ingest.Target {
	var out []ingest.Target
	for _, ep := range mine {
		if ep.GetKvEventsEndpoint() == "" {
			continue
		}
		t := ingest.Target{Pod: ep.GetName(), Model: ep.GetModel(), Events: ep.GetKvEventsEndpoint(), Replay: ep.GetKvReplayEndpoint()}
		if seq, ok := proj.PodSeq(ep.GetName()); ok {
			t.Resume = &seq
		}
		out = append(out, t)
	}
	return out
}

// centralPods are every registered endpoint as a pod that may connect to
// this replica's socket, with the addresses its topic may name it by.
func centralPods(eps []*registryv1.Endpoint, proj projected) ([]ingest.Target, map[string][]string) {
	ts := make([]ingest.Target, 0, len(eps))
	addrs := make(map[string][]string, len(eps))
	for _, ep := range eps {
		t := ingest.Target{Pod: ep.GetName(), Model: ep.GetModel(), Replay: ep.GetKvReplayEndpoint()}
		if seq, ok := proj.PodSeq(ep.GetName()); ok {
			t.Resume = &seq
		}
		ts = append(ts, t)
		if a := ep.GetAddress(); a != "" {
			addrs[t.Pod] = []string{a, net.JoinHostPort(a, strconv.Itoa(int(ep.GetPort())))}
		}
	}
	return ts, addrs
}

// streamSink appends ingested batches to the pod's subject of HERMOD_KV.
type streamSink struct {
	pub *bus.Publisher
	log *slog.Logger
}

func (s *streamSink) Emit(b *eventsv1.KVEventBatch) {
	subject, err := bus.KVSubject(b.GetPool(), b.GetPod())
	if err != nil {
		s.log.Error("no subject for a pod's KV events", "pod", b.GetPod(), "error", err)
		return
	}
	s.pub.Publish(subject, ingest.MsgID(b), b)
}
