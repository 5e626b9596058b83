package app

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/valkey-io/valkey-go"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	"github.com/hermod/hermod/libs/bus"
	"github.com/hermod/hermod/libs/kv/index"
	"github.com/hermod/hermod/libs/kv/valkeyindex"
	"github.com/hermod/hermod/services/indexer/internal/projection"
	"github.com/hermod/hermod/services/indexer/internal/service"
)

// projected is the index the replica answers from: its own projection of
// the stream, or the pool's shared one.
type projected interface {
	service.Source
	// PodSeq is the pod's last engine sequence on the stream (ingest
	// resumes after it).
	PodSeq(pod string) (uint64, bool)
	Stats() index.Stats
}

// followLocal projects the stream into this replica's own index, from
// the newest snapshot and the stream after it, and snapshots it
// periodically; observe sees each batch after it is applied. caughtUp is
// closed once the projection reaches the stream's end.
func followLocal(ctx context.Context, js jetstream.JetStream, cfg Config, reg *prometheus.Registry, caughtUp chan<- struct{}, observe func(*eventsv1.KVEventBatch), log *slog.Logger) (*projection.Projector, uint64, func(), error) {
	snaps, err := newSnapshots(js, cfg.Pool, cfg.Replica, cfg.StreamReplicas, reg, log)
	if err != nil {
		return nil, 0, nil, err
	}
	proj := snaps.load(ctx, cfg.Index, reg)
	var restoredAt uint64
	if proj != nil {
		restoredAt = proj.StreamSequence()
	} else {
		idx, err := index.New(cfg.Index)
		if err != nil {
			return nil, 0, nil, err
		}
		if proj, err = projection.New(idx, reg); err != nil {
			return nil, 0, nil, err
		}
	}
	from := uint64(0) // the whole stream
	if restoredAt > 0 {
		from = restoredAt + 1
	}
	cons, err := bus.Consume(ctx, js, bus.ConsumeOptions{Stream: bus.KVStream, FilterSubject: bus.KVPrefix + cfg.Pool + ".>", StartSequence: from, Logger: log, Registerer: reg},
		func(b *eventsv1.KVEventBatch, m bus.Meta) {
			proj.Apply(b, m.Sequence)
			observe(b)
		})
	if err != nil {
		return nil, 0, nil, err
	}
	sctx, stopSnapshots := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case <-cons.CaughtUp():
			close(caughtUp)
		case <-sctx.Done():
			return
		}
		if cfg.SnapshotInterval > 0 {
			snaps.run(sctx, proj, cfg.SnapshotInterval)
		}
	}()
	stop := func() {
		stopSnapshots()
		<-done
		cons.Close()
	}
	return proj, restoredAt, stop, nil
}

// openShared connects to the pool's shared index.
func openShared(ctx context.Context, cfg Config, reg prometheus.Registerer, log *slog.Logger) (*projection.Shared, func(), error) {
	opt, err := cfg.SharedIndex.ClientOption(cfg.SharedIndexURL)
	if err != nil {
		return nil, nil, fmt.Errorf("kvBlockIndexConfig address: %w", err)
	}
	opt.DisableCache = true
	opt.ClientName = "hermod-indexer-" + cfg.Replica
	c, err := valkey.NewClient(opt)
	if err != nil {
		return nil, nil, fmt.Errorf("shared index at %s: %w", cfg.SharedIndexURL, err)
	}
	octx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	x, cursor, err := valkeyindex.New(octx, c, valkeyindex.Config{Pool: cfg.Pool, BlockSize: cfg.Index.BlockSize, Seed: cfg.Index.Seed, Weights: cfg.Index.Weights})
	if err == nil {
		var seqs map[string]uint64
		if seqs, err = x.PodSeqs(octx); err == nil {
			// speculative entries stay in this replica's memory: they
			// come from the decision stream, which every replica follows
			var spec *index.Index
			if spec, err = index.New(index.Config{BlockSize: cfg.Index.BlockSize, Seed: cfg.Index.Seed, Size: 1, Shards: 16}); err == nil {
				var s *projection.Shared
				if s, err = projection.NewShared(x, seqs, spec, reg, log); err == nil {
					log.Info("shared index", "address", cfg.SharedIndexURL, "cursor", cursor, "pods", len(seqs))
					return s, c.Close, nil
				}
			}
		}
	}
	c.Close()
	return nil, nil, fmt.Errorf("shared index at %s: %w", cfg.SharedIndexURL, err)
}

// followShared offers the pool's stream to the shared index from its
// cursor, and again from a reset cursor whenever the server loses it,
// until ctx ends; observe sees each batch after it is offered. caughtUp
// is closed once the first pass reaches the stream's end.
func followShared(ctx context.Context, js jetstream.JetStream, pool string, s *projection.Shared, caughtUp chan<- struct{}, observe func(*eventsv1.KVEventBatch), log *slog.Logger) {
	from := s.Index().Cursor() + 1
	first := true
	for ctx.Err() == nil {
		cons, err := bus.Consume(ctx, js, bus.ConsumeOptions{Stream: bus.KVStream, FilterSubject: bus.KVPrefix + pool + ".>", StartSequence: from, Logger: log},
			func(b *eventsv1.KVEventBatch, m bus.Meta) {
				s.Offer(ctx, b, m.Sequence)
				observe(b)
			})
		if err != nil {
			log.Error("the KV stream consumer did not start: retrying", "error", err)
			sleep(ctx, time.Second)
			continue
		}
		if first {
			select {
			case <-cons.CaughtUp():
				close(caughtUp)
				first = false
			case <-s.Lost():
			case <-cons.Done():
			case <-ctx.Done():
			}
		}
		select {
		case <-s.Lost():
		case <-cons.Done():
			log.Warn("the KV stream consumer stopped: restarting it")
		case <-ctx.Done():
		}
		cons.Close()
		if ctx.Err() != nil {
			return
		}
		for {
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			from, err = s.Reset(rctx)
			cancel()
			if err == nil || ctx.Err() != nil {
				break
			}
			log.Warn("the shared index is unavailable: retrying", "error", err)
			sleep(ctx, time.Second)
		}
		log.Info("offering the KV stream to the shared index again", "from", from)
	}
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// logIndex logs the index's figures every interval (metricsLoggingInterval).
func logIndex(ctx context.Context, p projected, every time.Duration, log *slog.Logger) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			st := p.Stats()
			log.Info("index", "stream_sequence", p.StreamSequence(), "stored", st.Stored, "removed", st.Removed,
				"unknown_parent", st.UnknownParent, "malformed", st.Malformed)
		}
	}
}
