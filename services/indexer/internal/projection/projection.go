// Package projection builds the block index from the HERMOD_KV stream:
// every indexer replica applies the same batches in stream order and so
// holds the same index.
package projection

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	"github.com/hermod/hermod/libs/kv/blockkey"
	"github.com/hermod/hermod/libs/kv/events"
	"github.com/hermod/hermod/libs/kv/index"
	"github.com/hermod/hermod/libs/telemetry"
)

// Projector applies stream messages to an index. Apply is called by one
// goroutine (the stream consumer); the other methods are safe from any.
type Projector struct {
	idx *index.Index
	dec *events.Decoder
	b   events.Batch
	m   *metrics

	// applyMu is held by Apply and by snapshots: a snapshot sees the index
	// between two messages.
	applyMu sync.Mutex

	mu      sync.Mutex
	podSeqs map[string]uint64 // the last engine seq applied per pod
	stats   index.Stats

	streamSeq atomic.Uint64
}

// New returns a projector onto idx.
func New(idx *index.Index, reg prometheus.Registerer) (*Projector, error) {
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	return &Projector{idx: idx, dec: events.NewDecoder(), m: m, podSeqs: map[string]uint64{}}, nil
}

// Snapshot format: magic "HKVPRJ01", the stream sequence (8 bytes), the
// pods' last engine sequence numbers (count, then name and seq each), then
// the index's snapshot (index.WriteSnapshot).
const snapshotMagic = "HKVPRJ01"

// WriteSnapshot writes the projection as of the last message applied and
// returns that message's stream sequence: a replica that loads it
// consumes the stream from the next one.
func (p *Projector) WriteSnapshot(w io.Writer) (uint64, error) {
	p.applyMu.Lock()
	defer p.applyMu.Unlock()
	seq := p.streamSeq.Load()
	b := append([]byte(snapshotMagic), make([]byte, 8)...)
	binary.LittleEndian.PutUint64(b[len(snapshotMagic):], seq)
	p.mu.Lock()
	b = binary.AppendUvarint(b, uint64(len(p.podSeqs)))
	for pod, s := range p.podSeqs {
		b = binary.AppendUvarint(b, uint64(len(pod)))
		b = append(b, pod...)
		b = binary.AppendUvarint(b, s)
	}
	p.mu.Unlock()
	if _, err := w.Write(b); err != nil {
		return 0, fmt.Errorf("projection snapshot: %w", err)
	}
	if err := p.idx.WriteSnapshot(w); err != nil {
		return 0, err
	}
	return seq, nil
}

// ReadSnapshot restores a projection written by WriteSnapshot onto an
// index configured by cfg.
func ReadSnapshot(r io.Reader, cfg index.Config, reg prometheus.Registerer) (*Projector, error) {
	br := bufio.NewReader(r)
	head := make([]byte, len(snapshotMagic)+8)
	if _, err := io.ReadFull(br, head); err != nil || string(head[:len(snapshotMagic)]) != snapshotMagic {
		return nil, fmt.Errorf("%w: not a projection snapshot", index.ErrSnapshot)
	}
	seq := binary.LittleEndian.Uint64(head[len(snapshotMagic):])
	n, err := binary.ReadUvarint(br)
	if err != nil || n > 1<<20 {
		return nil, fmt.Errorf("%w: bad pod count", index.ErrSnapshot)
	}
	podSeqs := make(map[string]uint64, n)
	for range n {
		l, err := binary.ReadUvarint(br)
		if err != nil || l > 1<<10 {
			return nil, fmt.Errorf("%w: bad pod name", index.ErrSnapshot)
		}
		name := make([]byte, l)
		if _, err := io.ReadFull(br, name); err != nil {
			return nil, fmt.Errorf("%w: %w", index.ErrSnapshot, err)
		}
		s, err := binary.ReadUvarint(br)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", index.ErrSnapshot, err)
		}
		podSeqs[string(name)] = s
	}
	idx, err := index.ReadSnapshot(br, cfg)
	if err != nil {
		return nil, err
	}
	p, err := New(idx, reg)
	if err != nil {
		return nil, err
	}
	p.podSeqs = podSeqs
	p.streamSeq.Store(seq)
	return p, nil
}

// Index is the projected index.
func (p *Projector) Index() *index.Index { return p.idx }

// Keyer returns the block keyer of the index.
func (p *Projector) Keyer() *blockkey.Keyer { return p.idx.Keyer() }

// Match matches a prompt's keys (index.Index.Match).
func (p *Projector) Match(_ context.Context, keys []blockkey.Key, candidates []string, now int64) ([]index.Match, error) {
	return p.idx.Match(keys, candidates, now, nil), nil
}

// Lookup returns the holders of a key.
func (p *Projector) Lookup(_ context.Context, k blockkey.Key) ([]index.Holder, error) {
	return p.idx.Lookup(k), nil
}

// Apply applies one stream message stored at stream sequence streamSeq.
// A payload that does not decode is counted and dropped; the rest of the
// pod's stream still applies.
func (p *Projector) Apply(b *eventsv1.KVEventBatch, streamSeq uint64) {
	p.applyMu.Lock()
	defer p.applyMu.Unlock()
	defer p.streamSeq.Store(streamSeq)
	pod := b.GetPod()
	if b.GetClearPod() {
		p.idx.ClearPod(pod)
		p.m.clears.Inc()
	}
	var st index.Stats
	if len(b.GetPayload()) > 0 {
		if err := p.dec.Decode(b.GetPayload(), &p.b); err != nil {
			p.m.malformed.Inc()
		} else {
			st = p.idx.Apply(pod, b.GetModel(), &p.b)
		}
	}
	p.m.add(st)
	p.mu.Lock()
	p.podSeqs[pod] = b.GetSeq()
	p.stats.Add(st)
	p.mu.Unlock()
}

// PodSeq returns the last engine sequence number applied for the pod.
func (p *Projector) PodSeq(pod string) (uint64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s, ok := p.podSeqs[pod]
	return s, ok
}

// StreamSequence is the stream sequence of the last message applied.
func (p *Projector) StreamSequence() uint64 { return p.streamSeq.Load() }

// Stats returns the totals of what the applied batches did.
func (p *Projector) Stats() index.Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

type metrics struct {
	blocks    *prometheus.CounterVec
	dropped   *prometheus.CounterVec
	clears    prometheus.Counter
	malformed prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		blocks:    telemetry.NewCounterVec("hermod_indexer_blocks_applied_total", "Index blocks stored and removed by applied events.", "op"),
		dropped:   telemetry.NewCounterVec("hermod_indexer_events_dropped_total", "Events dropped while applying, by reason: unknown_parent, unknown_removed, malformed, ignored.", "reason"),
		clears:    telemetry.NewCounter("hermod_indexer_pod_clears_total", "Pods whose blocks were cleared (resets and AllBlocksCleared)."),
		malformed: telemetry.NewCounter("hermod_indexer_malformed_batches_total", "Stream messages whose payload did not decode."),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.blocks, m.dropped, m.clears, m.malformed} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("projection metrics: %w", err)
			}
		}
	}
	return m, nil
}

func (m *metrics) add(st index.Stats) {
	if st.Stored > 0 {
		m.blocks.WithLabelValues("stored").Add(float64(st.Stored))
	}
	if st.Removed > 0 {
		m.blocks.WithLabelValues("removed").Add(float64(st.Removed))
	}
	drop := func(reason string, n int) {
		if n > 0 {
			m.dropped.WithLabelValues(reason).Add(float64(n))
		}
	}
	drop("unknown_parent", st.UnknownParent)
	drop("unknown_removed", st.UnknownRemoved)
	drop("malformed", st.Malformed)
	drop("ignored", st.Ignored)
	if st.Cleared > 0 {
		m.clears.Add(float64(st.Cleared))
	}
}
