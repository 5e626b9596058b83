package app

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hermod/hermod/libs/bus"
	"github.com/hermod/hermod/libs/kv/index"
	"github.com/hermod/hermod/libs/telemetry"
	"github.com/hermod/hermod/services/indexer/internal/projection"
)

// SnapshotBucket is the NATS object store of index snapshots: one object
// per replica, <pool>.<replica>, with the stream sequence it covers in its
// metadata. A starting replica loads the newest of its pool and consumes
// the HERMOD_KV stream from the next message, so its start does not depend
// on the stream's age limit.
const SnapshotBucket = "HERMOD_KV_SNAPSHOTS"

const seqKey = "stream-sequence"

// Bounds of the snapshot bucket's requests. A starting replica gives
// opening and listing the bucket listTimeout, and reading the snapshot
// transferTimeout (writing one has as long), then builds its index from
// the stream instead: the snapshots only shorten the start.
const (
	openTimeout     = 10 * time.Second
	listTimeout     = 20 * time.Second
	transferTimeout = time.Minute
)

type snapshots struct {
	js            jetstream.JetStream
	replicas      int
	pool, replica string
	log           *slog.Logger
	took          prometheus.Histogram
	size, covered prometheus.Gauge
	failures      prometheus.Counter

	// obs is the bucket once open: load opens it, then run (which load
	// happens before) if load could not.
	obs jetstream.ObjectStore

	// uploading, when set (tests), is called by save between writing the
	// snapshot and uploading it.
	uploading func()
}

// newSnapshots registers the snapshot metrics; the bucket is opened by
// load, with replicas replicas (0 keeps those it has, as the streams do).
func newSnapshots(js jetstream.JetStream, pool, replica string, replicas int, reg prometheus.Registerer, log *slog.Logger) (*snapshots, error) {
	s := &snapshots{
		js: js, replicas: replicas, pool: pool, replica: replica, log: log,
		took:     telemetry.NewHistogram("hermod_indexer_snapshot_seconds", "Time to write and upload an index snapshot.", prometheus.ExponentialBuckets(0.01, 2, 12)),
		size:     telemetry.NewGauge("hermod_indexer_snapshot_bytes", "Size of the last index snapshot."),
		covered:  telemetry.NewGauge("hermod_indexer_snapshot_stream_sequence", "HERMOD_KV stream sequence the last snapshot covers."),
		failures: telemetry.NewCounter("hermod_indexer_snapshot_failures_total", "Index snapshots that could not be written or loaded."),
	}
	for _, c := range []prometheus.Collector{s.took, s.size, s.covered, s.failures} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("snapshot metrics: %w", err)
		}
	}
	return s, nil
}

// open opens (or creates) the bucket unless it is open.
func (s *snapshots) open(ctx context.Context) error {
	if s.obs != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, openTimeout)
	defer cancel()
	obs, err := bus.EnsureObjectStore(ctx, s.js, jetstream.ObjectStoreConfig{Bucket: SnapshotBucket, Description: "hermod-indexer's index snapshots", Storage: jetstream.FileStorage, Replicas: s.replicas})
	if err != nil {
		return fmt.Errorf("snapshot bucket: %w", err)
	}
	s.obs = obs
	return nil
}

func (s *snapshots) name() string { return s.pool + "." + s.replica }

// load restores the newest snapshot of the pool; nil when there is none
// or none loads (the replica then builds its index from the stream).
func (s *snapshots) load(ctx context.Context, cfg index.Config, reg prometheus.Registerer) *projection.Projector {
	best, err := s.newest(ctx)
	if err != nil {
		s.failures.Inc()
		s.log.Warn("cannot list index snapshots; building the index from the stream", "error", err)
		return nil
	}
	if best == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, transferTimeout)
	defer cancel()
	obj, err := s.obs.Get(ctx, best)
	if err != nil {
		s.failures.Inc()
		s.log.Warn("cannot read an index snapshot; building the index from the stream", "snapshot", best, "error", err)
		return nil
	}
	defer func() { _ = obj.Close() }()
	p, err := projection.ReadSnapshot(obj, cfg, reg)
	if err != nil {
		s.failures.Inc()
		s.log.Warn("an index snapshot does not load; building the index from the stream", "snapshot", best, "error", err)
		return nil
	}
	s.log.Info("index restored from a snapshot", "snapshot", best, "stream_sequence", p.StreamSequence(), "keys", p.Index().Len())
	return p
}

// newest names the pool's snapshot covering the most of the stream; ""
// when there is none.
func (s *snapshots) newest(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, listTimeout)
	defer cancel()
	if err := s.open(ctx); err != nil {
		return "", err
	}
	// An empty bucket is not listed: List waits for the bucket's last
	// entry, and on an empty bucket for a marker that it withholds when
	// its first request fails, until its context ends. A listing that
	// gets no answer (a stream just created in a cluster, say) is asked
	// again.
	st, err := bus.Lookup(ctx, s.obs.Status)
	if err != nil {
		return "", fmt.Errorf("snapshot bucket status: %w", err)
	}
	if st.Size() == 0 {
		return "", nil
	}
	infos, err := bus.Lookup(ctx, func(ctx context.Context) ([]*jetstream.ObjectInfo, error) { return s.obs.List(ctx) })
	if errors.Is(err, jetstream.ErrNoObjectsFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	var best string
	var bestSeq uint64
	for _, info := range infos {
		if info.Deleted || !strings.HasPrefix(info.Name, s.pool+".") {
			continue
		}
		seq, err := strconv.ParseUint(info.Metadata[seqKey], 10, 64)
		if err != nil {
			continue
		}
		if best == "" || seq > bestSeq {
			best, bestSeq = info.Name, seq
		}
	}
	return best, nil
}

// save writes and uploads this replica's snapshot and returns the stream
// sequence it covers (events applied while it uploads are not in it).
func (s *snapshots) save(ctx context.Context, p *projection.Projector) (uint64, error) {
	start := time.Now()
	var buf bytes.Buffer
	seq, err := p.WriteSnapshot(&buf)
	if err != nil {
		s.failures.Inc()
		return 0, err
	}
	size := buf.Len()
	if s.uploading != nil {
		s.uploading()
	}
	ctx, cancel := context.WithTimeout(ctx, transferTimeout)
	defer cancel()
	if _, err := s.obs.Put(ctx, jetstream.ObjectMeta{Name: s.name(), Metadata: map[string]string{seqKey: strconv.FormatUint(seq, 10)}}, &buf); err != nil {
		s.failures.Inc()
		return 0, fmt.Errorf("upload the index snapshot: %w", err)
	}
	s.took.Observe(time.Since(start).Seconds())
	s.size.Set(float64(size))
	s.covered.Set(float64(seq))
	s.log.Debug("index snapshot written", "stream_sequence", seq, "bytes", size, "took", time.Since(start))
	return seq, nil
}

// run saves a snapshot every interval until ctx ends, when the index has
// moved past what the last one covers. That is the sequence the snapshot
// was written at, not the projector's after the upload: events applied
// during an upload make the next tick write another, even when the stream
// goes quiet after them.
func (s *snapshots) run(ctx context.Context, p *projection.Projector, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	var covered uint64
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if p.StreamSequence() == covered {
			continue
		}
		if err := s.open(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			s.failures.Inc()
			s.log.Warn("index snapshot skipped", "error", err)
			continue
		}
		seq, err := s.save(ctx, p)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			s.log.Warn("index snapshot failed", "error", err)
			continue
		}
		covered = seq
	}
}
