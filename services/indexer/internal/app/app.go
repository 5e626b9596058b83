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
	"net"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	indexerv1 "github.com/hermod/hermod/libs/api/hermod/indexer/v1"
	registryv1 "github.com/hermod/hermod/libs/api/hermod/registry/v1"
	"github.com/hermod/hermod/libs/bootstrap"
	"github.com/hermod/hermod/libs/bus"
	"github.com/hermod/hermod/libs/coord"
	"github.com/hermod/hermod/libs/kv/index"
	"github.com/hermod/hermod/libs/telemetry"
	"github.com/hermod/hermod/services/indexer/internal/ingest"
	"github.com/hermod/hermod/services/indexer/internal/service"
)

// Config is the indexer's configuration (its flags).
type Config struct {
	// Config is the pool, the replica, etcd, NATS and tracing.
	bootstrap.Config
	GRPCListen    string
	MetricsListen string
	MemberTTL     time.Duration
	// Index bounds the in-memory index, and keys blocks.
	Index index.Config
	// SharedIndexURL, when set, keeps the index in this Valkey/Redis
	// server, shared by the pool's replicas (redisConfig/valkeyConfig),
	// instead of one in-memory copy per replica.
	SharedIndexURL string
	// SharedIndex is its TLS and credentials.
	SharedIndex bootstrap.ValkeySecurity
	// LogInterval, when positive, logs the index's figures this often
	// (metricsLoggingInterval).
	LogInterval time.Duration
	// ZMQBind, when set, binds a SUB socket there for pods that connect
	// to the indexer (centralized mode, e.g. tcp://*:5557).
	ZMQBind string
	// SilentAfter is how long a pod's live KV events may stop before the
	// pod is reported silent (0: ingest.DefaultSilentAfter).
	SilentAfter time.Duration
	// SnapshotInterval is how often this replica snapshots its index into
	// the object store (0: never).
	SnapshotInterval time.Duration
	// Ready, when set, is called with the gRPC and ops addresses once the
	// indexer serves (tests).
	Ready func(grpcAddr, opsAddr string)
}

// Defaults. The listen addresses are loopback, so that an indexer
// started by hand serves nobody else; a deployment passes the pod's
// address (the Helm chart does).
const (
	DefaultGRPCListen       = "127.0.0.1:9095"
	DefaultMetricsListen    = "127.0.0.1:9096"
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
	if cfg.MemberTTL <= 0 {
		cfg.MemberTTL = DefaultMemberTTL
	}
	svc, err := bootstrap.Start(ctx, bootstrap.Options{Name: "hermod-indexer", Config: cfg.Config, Logger: log})
	if err != nil {
		return err
	}
	defer svc.Close()
	cfg.Replica, log = svc.Replica, svc.Log
	b, err := svc.Connect(ctx)
	if err != nil {
		return err
	}
	etcd, js := b.Etcd, b.JetStream
	pub, err := svc.Publisher(b.NATS, "KV event batches")
	if err != nil {
		return err
	}
	i := &indexer{cfg: cfg, svc: svc, log: log, caughtUp: make(chan struct{})}
	if err := i.project(ctx, js); err != nil || ctx.Err() != nil {
		return err
	}
	own, err := i.startIngest(ctx, etcd, pub)
	if err != nil {
		return err
	}
	gopts, err := svc.GRPCServerOptions()
	if err != nil {
		return err
	}
	gsrv := grpc.NewServer(gopts...)
	indexerv1.RegisterIndexerServiceServer(gsrv, service.New(cfg.Pool, i.proj))
	ready := func() error {
		select {
		case <-i.caughtUp:
		default:
			return errors.New("the index has not caught up with the stream")
		}
		return own.Ready()
	}
	ops := telemetry.OpsServer(svc.Ops(debugHandler(telemetry.OpsHandler(svc.Registry, ready), i.proj, i.restoredAt)))
	return svc.Serve(ctx, bootstrap.Run{
		Servers: []bootstrap.Server{{Name: "grpc", Addr: cfg.GRPCListen, GRPC: gsrv}, {Name: "ops", Addr: cfg.MetricsListen, HTTP: ops}},
		OnReady: func(addrs map[string]string) {
			if cfg.Ready != nil {
				cfg.Ready(addrs["grpc"], addrs["ops"])
			}
		},
	})
}

// indexer is the state of a running indexer.
type indexer struct {
	cfg        Config
	svc        *bootstrap.Service
	log        *slog.Logger
	proj       projected
	restoredAt uint64
	caughtUp   chan struct{}
	// ingest, once it runs, is told of every batch on the stream
	ingest atomic.Pointer[ingest.Manager]
}

// observe tells ingest (once it runs) about a batch on the stream.
func (i *indexer) observe(b *eventsv1.KVEventBatch) {
	if mg := i.ingest.Load(); mg != nil {
		mg.Observe(b)
	}
}

// project follows the KV stream into the index and waits until it has
// caught up (ingest resumes each pod after its last batch on the stream,
// so it waits for that), then follows the speculative entries. It returns
// nil without having caught up when ctx ends first.
func (i *indexer) project(ctx context.Context, js jetstream.JetStream) error {
	cfg, svc, log := i.cfg, i.svc, i.log
	var specIdx *index.Index
	if cfg.SharedIndexURL != "" {
		shared, closeShared, err := openShared(ctx, cfg, svc.Registry, log)
		if err != nil {
			return err
		}
		svc.OnClose(closeShared)
		i.proj, specIdx = shared, shared.Speculation()
		svc.Go(func(ctx context.Context) { followShared(ctx, js, cfg.Pool, shared, i.caughtUp, i.observe, log) })
	} else {
		p, restored, stop, err := followLocal(ctx, js, cfg, svc.Registry, i.caughtUp, i.observe, log)
		if err != nil {
			return err
		}
		svc.OnClose(stop)
		i.proj, specIdx, i.restoredAt = p, p.Index(), restored
	}
	select {
	case <-i.caughtUp:
	case <-ctx.Done():
		return nil
	case <-time.After(catchUpTimeout):
		return fmt.Errorf("the projection did not catch up with the KV stream within %v", catchUpTimeout)
	}
	log.Info("index caught up with the stream", "stream_sequence", i.proj.StreamSequence(), "restored_at", i.restoredAt, "shared", cfg.SharedIndexURL != "")
	spec, err := followSpeculation(ctx, js, cfg.Pool, specIdx, svc.Registry, log)
	if err != nil {
		return err
	}
	svc.OnClose(spec.Close)
	if cfg.LogInterval > 0 {
		svc.Go(func(ctx context.Context) { logIndex(ctx, i.proj, cfg.LogInterval, log) })
	}
	return nil
}

// startIngest starts ingesting the KV events of the endpoints this replica
// owns (and, with --zmq-bind, of the pods that connect to it). Each pod
// resumes after its last batch on the stream.
func (i *indexer) startIngest(ctx context.Context, etcd *clientv3.Client, pub *bus.Publisher) (*coord.Ownership, error) {
	cfg, svc, log := i.cfg, i.svc, i.log
	mg, err := ingest.NewManager(ingest.Config{Pool: cfg.Pool, Replica: cfg.Replica, Sink: &streamSink{pub: pub, log: log},
		Position: i.proj.PodSeq, SilentAfter: cfg.SilentAfter, Logger: log, Registerer: svc.Registry})
	if err != nil {
		return nil, err
	}
	svc.OnClose(mg.Close)
	i.ingest.Store(mg)
	var central *ingest.Central
	if cfg.ZMQBind != "" {
		if central, err = i.startCentral(mg); err != nil {
			return nil, err
		}
	}
	own, err := coord.Share(ctx, etcd, coord.ShareOptions{
		Pool: cfg.Pool, Group: servicePrefix + cfg.Pool, Replica: cfg.Replica, TTL: cfg.MemberTTL,
		Assign: func(mine []*registryv1.Endpoint) { mg.SetTargets(targets(mine, central != nil)) },
		OnEndpoints: func(s coord.Snapshot) {
			if central != nil {
				central.SetPods(centralPods(s.Sorted()))
			}
		},
	}, coord.WithLogger(log))
	if err != nil {
		return nil, err
	}
	svc.OnClose(own.Close)
	return own.Ownership, nil
}

// startCentral binds the socket pods connect to (--zmq-bind).
func (i *indexer) startCentral(mg *ingest.Manager) (*ingest.Central, error) {
	central := mg.NewCentral(i.cfg.ZMQBind, ingest.DefaultTopicPrefix)
	done, bound := make(chan error, 1), make(chan error, 1)
	i.svc.Go(func(ctx context.Context) { done <- central.Run(ctx, bound) })
	if err := <-bound; err != nil {
		return nil, fmt.Errorf("--zmq-bind: %w", err)
	}
	i.svc.OnClose(func() {
		if err := <-done; err != nil {
			i.log.Warn("centralized ingest stopped with an error", "error", err)
		}
	})
	return central, nil
}

// targets are the owned endpoints whose KV events this replica ingests:
// those that bind an event socket it follows, and with a centralized
// socket (central) every one, since any may connect to it.
func targets(mine []*registryv1.Endpoint, central bool) []ingest.Target {
	var out []ingest.Target
	for _, ep := range mine {
		if ep.GetKvEventsEndpoint() == "" && !central {
			continue
		}
		out = append(out, ingest.Target{Pod: ep.GetName(), Model: ep.GetModel(), Events: ep.GetKvEventsEndpoint(), Replay: ep.GetKvReplayEndpoint()})
	}
	return out
}

// centralPods are every registered endpoint as a pod that may connect to
// this replica's socket, with the addresses its topic may name it by.
func centralPods(eps []*registryv1.Endpoint) ([]ingest.Target, map[string][]string) {
	ts := make([]ingest.Target, 0, len(eps))
	addrs := make(map[string][]string, len(eps))
	for _, ep := range eps {
		t := ingest.Target{Pod: ep.GetName(), Model: ep.GetModel(), Replay: ep.GetKvReplayEndpoint()}
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
