// Package mmcache is the llm-d router's multimodal encoder-cache
// affinity: mm-embeddings-cache-producer remembers, per endpoint, the
// media items (images, audio, video: the hashes libs/openai takes of each
// content part) recently routed to it, and mm-embeddings-cache-scorer
// prefers the endpoints likely to hold a request's items in their
// encoder cache already: score = items held / items in the request.
//
// The memory is the approximate prefix index's (libs/plugins/prefix.Index)
// keyed by item hash, matched as a set: a bounded LRU per endpoint,
// cacheSizeInMBPerServer / 2 MiB entries, ordered by decision stamps and
// fed by the decision stream (a Projection), so every picker replica holds
// the same.
package mmcache

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hermod/hermod/libs/openai"
	"github.com/hermod/hermod/libs/plugins/prefix"
	"github.com/hermod/hermod/libs/scheduling"
)

// Plugin types.
const (
	ProducerType = "mm-embeddings-cache-producer"
	ScorerType   = "mm-embeddings-cache-scorer"
)

// Sizing (upstream's): the budget is the model server's encoder cache,
// each item assumed to take EntryMB of it.
const (
	DefaultCacheSizeInMBPerServer = 4096
	EntryMB                       = 2
)

func init() {
	scheduling.Register(scheduling.Registration{Type: ProducerType, New: NewProducer})
	scheduling.Register(scheduling.Registration{Type: ScorerType, New: NewScorer})
}

// Params are the producer's parameters.
type Params struct {
	// CacheSizeInMBPerServer is the endpoints' encoder cache budget; <= 0:
	// the default.
	CacheSizeInMBPerServer int `json:"cacheSizeInMBPerServer"`
}

type wireParams struct {
	Params
	// CacheSizeInMB is how llm-d's sample config names the budget.
	CacheSizeInMB *int `json:"cacheSizeInMB,omitempty"`
}

// Producer is mm-embeddings-cache-producer.
type Producer struct {
	scheduling.Named
	params   Params
	capacity int // entries per endpoint
	index    *prefix.Index
	key      scheduling.StateKey
	metrics  *metrics
}

// NewProducer builds an mm-embeddings-cache-producer.
func NewProducer(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
	var w wireParams
	if err := scheduling.DecodeParameters(raw, &w, h); err != nil {
		return nil, err
	}
	p := w.Params
	if w.CacheSizeInMB != nil {
		if p.CacheSizeInMBPerServer <= 0 {
			p.CacheSizeInMBPerServer = *w.CacheSizeInMB
		}
		h.Warn("parameters.cacheSizeInMB: read as cacheSizeInMBPerServer, the producer's name for it")
	}
	if p.CacheSizeInMBPerServer <= 0 {
		p.CacheSizeInMBPerServer = DefaultCacheSizeInMBPerServer
	}
	return &Producer{
		Named:    scheduling.Named{Type: ProducerType, Name: name},
		params:   p,
		capacity: max(p.CacheSizeInMBPerServer/EntryMB, 1),
		index:    prefix.NewIndex(),
		key:      scheduling.StateKey("hermod.mm-embeddings-cache." + name),
		metrics:  newMetrics(h),
	}, nil
}

// Parameters implements scheduling.ParameterReporter.
func (p *Producer) Parameters() any { return p.params }

// items are a request's distinct media items.
type items struct {
	hashes []uint64
	kinds  []openai.MediaKind
	match  scheduling.PrefixMatch // items held, per endpoint
	looked bool
}

// PrepareCycle implements scheduling.CyclePreparer: the request's items,
// each counted once.
func (p *Producer) PrepareCycle(_ context.Context, cs *scheduling.CycleState, req *scheduling.Request, _ []*scheduling.Endpoint) {
	p.itemsOf(cs, req)
}

func (p *Producer) itemsOf(cs *scheduling.CycleState, req *scheduling.Request) *items {
	if it, ok := scheduling.ReadState[*items](cs, p.key); ok {
		return it
	}
	it := &items{}
	for _, m := range req.Body.Messages {
		for _, x := range m.Items {
			if !slices.Contains(it.hashes, x.Hash) {
				it.hashes = append(it.hashes, x.Hash)
				it.kinds = append(it.kinds, x.Kind)
			}
		}
	}
	it.match.TotalBlocks = len(it.hashes)
	cs.Write(p.key, it)
	return it
}

// Match returns, per endpoint, how many of the request's media items it
// likely holds (TotalBlocks: the request's items), looked up once per
// cycle; nil when the request has none.
func (p *Producer) Match(cs *scheduling.CycleState, req *scheduling.Request) *scheduling.PrefixMatch {
	it := p.itemsOf(cs, req)
	if len(it.hashes) == 0 {
		return nil
	}
	if !it.looked {
		p.index.MatchAny(it.hashes, &it.match)
		it.looked = true
	}
	return &it.match
}

// PreRequest implements scheduling.PreRequest: the endpoints that encode
// the request (the encode stage's, else the primary's) will hold its
// items; the lookup is counted.
func (p *Producer) PreRequest(_ context.Context, cs *scheduling.CycleState, req *scheduling.Request, res *scheduling.Result) {
	m := p.Match(cs, req)
	if m == nil {
		return
	}
	it := p.itemsOf(cs, req)
	pr := res.Primary
	if res.Encode != nil {
		pr = res.Encode
	}
	t, ok := pr.Target()
	if !ok {
		return
	}
	p.metrics.observe(p.Name, p.index, it, t.Endpoint.Name)
	name := [1]string{t.Endpoint.Name}
	res.RecordEffect(p, name[:], it.hashes, int64(p.capacity))
}

// ApplyEffect implements scheduling.Projection.
func (p *Producer) ApplyEffect(decisionID uint64, at time.Time, e *scheduling.Effect) {
	st := scheduling.StampOf(decisionID, at)
	for _, name := range e.Endpoints {
		p.index.Add(name, int(e.Capacity), p.capacity, e.Blocks, st)
	}
}

// InheritState implements scheduling.StateInheritor: the memory carries
// over a reload.
func (p *Producer) InheritState(prev scheduling.Plugin) bool {
	q, ok := prev.(*Producer)
	if !ok {
		return false
	}
	p.index = q.index
	return true
}

// EndpointRemoved implements scheduling.EndpointRemover.
func (p *Producer) EndpointRemoved(name string) {
	p.index.RemoveEndpoint(name)
	p.metrics.hits.DeletePartialMatch(prometheus.Labels{"plugin_name": p.Name, "pod": name})
}

// Scorer is mm-embeddings-cache-scorer: the share of a request's media
// items an endpoint likely holds (0 without items).
type Scorer struct {
	scheduling.Named
	producer *Producer
}

// NewScorer builds an mm-embeddings-cache-scorer reading the pool's
// producer (the first declared before it, else one made with the default
// budget and shared).
func NewScorer(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
	if err := scheduling.DecodeParameters(raw, &struct{}{}, h); err != nil {
		return nil, err
	}
	p, err := h.DefaultPlugin(ProducerType)
	if err != nil {
		return nil, err
	}
	producer, ok := p.(*Producer)
	if !ok {
		return nil, fmt.Errorf("plugin %s is not an %s", p.TypedName(), ProducerType)
	}
	return &Scorer{Named: scheduling.Named{Type: ScorerType, Name: name}, producer: producer}, nil
}

// Score implements scheduling.Scorer.
func (s *Scorer) Score(_ context.Context, cs *scheduling.CycleState, req *scheduling.Request, eps []*scheduling.Endpoint, scores []float64) {
	m := s.producer.Match(cs, req)
	if m == nil || m.TotalBlocks == 0 || !m.Hit() {
		return
	}
	for i, e := range eps {
		scores[i] = float64(m.BlocksOf(e)) / float64(m.TotalBlocks)
	}
}

// metrics are upstream's encoder-cache metrics.
type metrics struct {
	queries  *prometheus.CounterVec
	hits     *prometheus.CounterVec
	hitRatio *prometheus.HistogramVec
}

func newMetrics(h scheduling.Handle) *metrics {
	return &metrics{
		queries: scheduling.Metric(h, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "llm_d_epp_encoder_cache_queries_total",
			Help: "Media item lookups in the encoder-cache affinity memory, by modality.",
		}, []string{"plugin_type", "plugin_name", "modality"})),
		hits: scheduling.Metric(h, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "llm_d_epp_encoder_cache_hits_total",
			Help: "Media item lookups that found the item on the endpoint the request went to, by endpoint and modality.",
		}, []string{"plugin_type", "plugin_name", "pod", "modality"})),
		hitRatio: scheduling.Metric(h, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "llm_d_epp_encoder_cache_hit_ratio",
			Help:    "Share of a request's media items the endpoint it went to likely held.",
			Buckets: prometheus.LinearBuckets(0, 0.1, 11),
		}, []string{"plugin_type", "plugin_name"})),
	}
}

// observe counts a request's lookups and those the endpoint it went to
// held, by modality.
func (m *metrics) observe(plugin string, index *prefix.Index, it *items, target string) {
	held := 0
	for i, h := range it.hashes {
		mod := modality(it.kinds[i])
		m.queries.WithLabelValues(ProducerType, plugin, mod).Inc()
		if index.Holds(target, h) {
			m.hits.WithLabelValues(ProducerType, plugin, target, mod).Inc()
			held++
		}
	}
	m.hitRatio.WithLabelValues(ProducerType, plugin).Observe(float64(held) / float64(len(it.hashes)))
}

func modality(k openai.MediaKind) string {
	switch k {
	case openai.MediaImage:
		return "image"
	case openai.MediaAudio:
		return "audio"
	case openai.MediaVideo:
		return "video"
	}
	return "other"
}
