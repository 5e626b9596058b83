// Package projection builds the block index from the HERMOD_KV stream:
// every indexer replica applies the same batches in stream order and so
// holds the same index.
package projection

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	"github.com/hermod/hermod/libs/kv/events"
	"github.com/hermod/hermod/libs/kv/index"
)

// Projector applies stream messages to an index. Apply is called by one
// goroutine (the stream consumer); the other methods are safe from any.
type Projector struct {
	idx *index.Index
	dec *events.Decoder
	b   events.Batch
	m   *metrics

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

// Index is the projected index.
func (p *Projector) Index() *index.Index { return p.idx }

// Apply applies one stream message stored at stream sequence streamSeq.
// A payload that does not decode is counted and dropped; the rest of the
// pod's stream still applies.
func (p *Projector) Apply(b *eventsv1.KVEventBatch, streamSeq uint64) {
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
		blocks:    prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hermod_indexer_blocks_applied_total", Help: "Index blocks stored and removed by applied events."}, []string{"op"}),
		dropped:   prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hermod_indexer_events_dropped_total", Help: "Events dropped while applying, by reason: unknown_parent, unknown_removed, malformed, ignored."}, []string{"reason"}),
		clears:    prometheus.NewCounter(prometheus.CounterOpts{Name: "hermod_indexer_pod_clears_total", Help: "Pods whose blocks were cleared (resets and AllBlocksCleared)."}),
		malformed: prometheus.NewCounter(prometheus.CounterOpts{Name: "hermod_indexer_malformed_batches_total", Help: "Stream messages whose payload did not decode."}),
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
