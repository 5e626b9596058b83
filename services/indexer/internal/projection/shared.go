package projection

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	"github.com/hermod/hermod/libs/kv/blockkey"
	"github.com/hermod/hermod/libs/kv/events"
	"github.com/hermod/hermod/libs/kv/index"
	"github.com/hermod/hermod/libs/kv/valkeyindex"
	"github.com/hermod/hermod/libs/telemetry"
)

// Shared projects the stream into a Valkey/Redis index that every replica
// of the pool shares: each replica offers each batch in stream order and
// the first one applies it (valkeyindex). Offer is called by one
// goroutine (the stream consumer); the other methods are safe from any.
type Shared struct {
	x   *valkeyindex.Index
	dec *events.Decoder
	b   events.Batch
	m   *metrics
	log *slog.Logger

	errors  prometheus.Counter
	offered prometheus.Counter

	mu      sync.Mutex
	podSeqs map[string]uint64
	stats   index.Stats

	streamSeq atomic.Uint64
	spec      *index.Index

	lostMu   sync.Mutex
	lost     chan struct{} // closed when the server lost the index
	lostOnce *sync.Once
}

// Retry bounds of a failing server, and the longest a query waits for it
// (a picker asking gives up sooner and fails open).
const (
	queryTimeout = time.Second
	applyTimeout = 5 * time.Second
	retryFirst   = 50 * time.Millisecond
	retryMax     = 2 * time.Second
)

// NewShared returns a projection onto x with the pods' last sequences
// (valkeyindex.New and PodSeqs); spec holds the replica's speculative
// entries, which Match adds.
func NewShared(x *valkeyindex.Index, podSeqs map[string]uint64, spec *index.Index, reg prometheus.Registerer, log *slog.Logger) (*Shared, error) {
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	s := &Shared{
		x: x, dec: events.NewDecoder(), m: m, log: log, podSeqs: podSeqs, spec: spec, lost: make(chan struct{}), lostOnce: new(sync.Once),
		errors:  telemetry.NewCounter("hermod_indexer_valkey_errors_total", "Calls to the shared Valkey/Redis index that failed (retried)."),
		offered: telemetry.NewCounter("hermod_indexer_batches_applied_elsewhere_total", "Stream batches another replica applied to the shared index first."),
	}
	if s.podSeqs == nil {
		s.podSeqs = map[string]uint64{}
	}
	s.streamSeq.Store(x.Cursor())
	if reg != nil {
		for _, c := range []prometheus.Collector{s.errors, s.offered} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return s, nil
}

// Index is the shared index.
func (s *Shared) Index() *valkeyindex.Index { return s.x }

// Lost is closed once the server has lost the index: Reset, then offer
// the stream again from the sequence it returns.
func (s *Shared) Lost() <-chan struct{} {
	s.lostMu.Lock()
	defer s.lostMu.Unlock()
	return s.lost
}

func (s *Shared) markLost() {
	s.lostMu.Lock()
	defer s.lostMu.Unlock()
	s.lostOnce.Do(func() { close(s.lost) })
}

// Reset adopts the server's index after a loss and returns the stream
// sequence to offer from.
func (s *Shared) Reset(ctx context.Context) (uint64, error) {
	cursor, err := s.x.Reset(ctx)
	if err != nil {
		return 0, err
	}
	seqs, err := s.x.PodSeqs(ctx)
	if err != nil {
		return 0, err
	}
	s.mu.Lock()
	s.podSeqs = seqs
	s.mu.Unlock()
	s.streamSeq.Store(cursor)
	s.lostMu.Lock()
	s.lost, s.lostOnce = make(chan struct{}), new(sync.Once)
	s.lostMu.Unlock()
	return cursor + 1, nil
}

// Offer offers the stream message stored at streamSeq, retrying while the
// server fails, until ctx ends. A payload that does not decode is counted
// and dropped.
func (s *Shared) Offer(ctx context.Context, b *eventsv1.KVEventBatch, streamSeq uint64) {
	select {
	case <-s.Lost():
		return // waiting for Reset
	default:
	}
	vb := valkeyindex.Batch{StreamSeq: streamSeq, Pod: b.GetPod(), Model: b.GetModel(), EngineSeq: b.GetSeq(), ClearPod: b.GetClearPod()}
	if len(b.GetPayload()) > 0 {
		if err := s.dec.Decode(b.GetPayload(), &s.b); err != nil {
			s.m.malformed.Inc()
		} else {
			vb.Events = &s.b
		}
	}
	wait := retryFirst
	for failed := false; ; {
		actx, cancel := context.WithTimeout(ctx, applyTimeout)
		applied, st, err := s.x.Apply(actx, vb)
		cancel()
		switch {
		case errors.Is(err, valkeyindex.ErrLost):
			s.log.Error("the shared index server lost the index: rebuilding it from the stream")
			s.markLost()
			return
		case err != nil:
			s.errors.Inc()
			if !failed {
				s.log.Warn("the shared index is unavailable: retrying (queries fail open meanwhile)", "error", err)
				failed = true
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			wait = min(2*wait, retryMax)
			continue
		}
		if failed {
			s.log.Info("the shared index is back")
		}
		if applied {
			s.m.add(st)
			if vb.ClearPod {
				s.m.clears.Inc()
			}
		} else {
			s.offered.Inc()
		}
		s.mu.Lock()
		s.podSeqs[vb.Pod] = vb.EngineSeq
		s.stats.Add(st)
		s.mu.Unlock()
		s.streamSeq.Store(streamSeq)
		return
	}
}

// PodSeq returns the last engine sequence number on the stream for the
// pod.
func (s *Shared) PodSeq(pod string) (uint64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, ok := s.podSeqs[pod]
	return n, ok
}

// StreamSequence is the stream sequence of the last message offered.
func (s *Shared) StreamSequence() uint64 { return s.streamSeq.Load() }

// Stats returns the totals of what the batches this replica applied did.
func (s *Shared) Stats() index.Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// Speculation is the replica's speculative entries (Match adds them).
func (s *Shared) Speculation() *index.Index { return s.spec }

// Keyer returns the block keyer of the index.
func (s *Shared) Keyer() *blockkey.Keyer { return s.x.Keyer() }

// Match matches a prompt's keys against the shared index and this
// replica's speculative entries.
func (s *Shared) Match(ctx context.Context, keys []blockkey.Key, candidates []string, now int64) ([]index.Match, error) {
	var spec valkeyindex.Speculation
	if s.spec != nil {
		spec = s.spec
	}
	ctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	return s.x.Match(ctx, keys, candidates, spec, now)
}

// Lookup returns the holders of a key.
func (s *Shared) Lookup(ctx context.Context, k blockkey.Key) ([]index.Holder, error) {
	ctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	return s.x.Lookup(ctx, k)
}
