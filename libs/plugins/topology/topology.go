// Package topology holds the llm-d router's topology plugins: where an
// endpoint runs (host, rack, zone, region) from its labels
// (topology-extractor), and, in a disaggregated request's prefill
// profile, placing the prefill pod near the decode pod already chosen so
// that the KV cache moves over NVLink rather than the network:
// topology-affinity-filter keeps the candidates close enough,
// topology-affinity-scorer grades them by closeness.
package topology

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/hermod/hermod/libs/scheduling"
)

// Plugin types.
const (
	ExtractorType = "topology-extractor"
	FilterType    = "topology-affinity-filter"
	ScorerType    = "topology-affinity-scorer"
)

// Default labels of topology-extractor (Kubernetes' well-known labels).
const (
	DefaultHostnameLabel = "kubernetes.io/hostname"
	DefaultRackLabel     = "topology.kubernetes.io/rack"
	DefaultZoneLabel     = "topology.kubernetes.io/zone"
	DefaultRegionLabel   = "topology.kubernetes.io/region"
)

func init() {
	scheduling.Register(scheduling.Registration{Type: ExtractorType, New: NewExtractor})
	scheduling.Register(scheduling.Registration{Type: FilterType, New: NewFilter})
	scheduling.Register(scheduling.Registration{Type: ScorerType, New: NewScorer})
}

// Topology is where an endpoint runs; an empty field is unknown.
type Topology struct {
	Hostname, Rack, Zone, Region string
}

// Known reports whether any field is known.
func (t Topology) Known() bool { return t != Topology{} }

// Level is how close two endpoints are: the tightest domain they share.
type Level int

// Levels, loosest first.
const (
	None Level = iota
	Region
	Zone
	Rack
	Host
)

// levelNames are the levels as minAffinity names them.
var levelNames = map[string]Level{"host": Host, "rack": Rack, "zone": Zone, "region": Region}

// Compare is the tightest domain a and b share. An unknown value never
// matches, not even another unknown one; the same host is the same rack,
// zone and region.
func Compare(a, b Topology) Level {
	same := func(x, y string) bool { return x != "" && x == y }
	switch {
	case same(a.Hostname, b.Hostname):
		return Host
	case same(a.Rack, b.Rack):
		return Rack
	case same(a.Zone, b.Zone):
		return Zone
	case same(a.Region, b.Region):
		return Region
	}
	return None
}

// ExtractorParams name the labels each field is read from.
type ExtractorParams struct {
	Hostname string `json:"hostname,omitempty"`
	Rack     string `json:"rack,omitempty"`
	Zone     string `json:"zone,omitempty"`
	Region   string `json:"region,omitempty"`
}

// Extractor is topology-extractor: an endpoint's topology from its
// labels (the registry's copy of the pod's).
type Extractor struct {
	scheduling.Named
	params ExtractorParams
}

// NewExtractor builds a topology-extractor.
func NewExtractor(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
	p := ExtractorParams{Hostname: DefaultHostnameLabel, Rack: DefaultRackLabel, Zone: DefaultZoneLabel, Region: DefaultRegionLabel}
	if err := scheduling.DecodeParameters(raw, &p, h); err != nil {
		return nil, err
	}
	return &Extractor{Named: scheduling.Named{Type: ExtractorType, Name: name}, params: p}, nil
}

// Parameters implements scheduling.ParameterReporter.
func (x *Extractor) Parameters() any { return x.params }

// Of is e's topology.
func (x *Extractor) Of(e *scheduling.Endpoint) Topology {
	if e == nil {
		return Topology{}
	}
	return Topology{Hostname: e.Labels[x.params.Hostname], Rack: e.Labels[x.params.Rack],
		Zone: e.Labels[x.params.Zone], Region: e.Labels[x.params.Region]}
}

// extractor is the topology-extractor a consumer reads: the one named,
// else the first declared before it (nil with a warning: the consumer
// then knows no topology).
func extractor(h scheduling.Handle, consumer, ref string) (*Extractor, error) {
	if ref != "" {
		p, err := h.Plugin(ref)
		if err != nil {
			return nil, scheduling.ParamErrorf("topologyProducerName", "%v", err)
		}
		x, ok := p.(*Extractor)
		if !ok {
			return nil, scheduling.ParamErrorf("topologyProducerName", "plugin %q (type %s) is not a %s", ref, p.TypedName().Type, ExtractorType)
		}
		return x, nil
	}
	for _, p := range h.Earlier() {
		if x, ok := p.(*Extractor); ok {
			return x, nil
		}
	}
	h.Warn(fmt.Sprintf("%s: no %s is declared before it, so no endpoint's topology is known: it keeps every candidate (filter) or scores 0 (scorer)", consumer, ExtractorType))
	return nil, nil
}

// peer is the topology of the endpoint the earlier stage picked (unknown
// without one).
func peer(x *Extractor, cs *scheduling.CycleState) Topology {
	if x == nil {
		return Topology{}
	}
	return x.Of(scheduling.PeerEndpoint(cs))
}

// FilterParams are topology-affinity-filter's parameters.
type FilterParams struct {
	MinAffinity          string `json:"minAffinity"`
	TopologyProducerName string `json:"topologyProducerName,omitempty"`
}

// Filter is topology-affinity-filter: it keeps the candidates at least
// MinAffinity close to the peer endpoint. It fails open: with no peer
// topology, or no candidate close enough, it keeps every candidate.
type Filter struct {
	scheduling.Named
	params FilterParams
	min    Level
	x      *Extractor
}

// NewFilter builds a topology-affinity-filter.
func NewFilter(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
	p := FilterParams{MinAffinity: "host"}
	if err := scheduling.DecodeParameters(raw, &p, h); err != nil {
		return nil, err
	}
	min, ok := levelNames[p.MinAffinity]
	if !ok {
		return nil, scheduling.ParamErrorf("minAffinity", "%q is not host, rack, zone or region", p.MinAffinity)
	}
	x, err := extractor(h, FilterType, p.TopologyProducerName)
	if err != nil {
		return nil, err
	}
	return &Filter{Named: scheduling.Named{Type: FilterType, Name: name}, params: p, min: min, x: x}, nil
}

// Parameters implements scheduling.ParameterReporter.
func (f *Filter) Parameters() any { return f.params }

// Filter implements scheduling.Filter.
func (f *Filter) Filter(_ context.Context, cs *scheduling.CycleState, _ *scheduling.Request, in, dst []*scheduling.Endpoint) []*scheduling.Endpoint {
	p := peer(f.x, cs)
	if !p.Known() {
		return append(dst, in...)
	}
	start := len(dst)
	for _, e := range in {
		if Compare(f.x.Of(e), p) >= f.min {
			dst = append(dst, e)
		}
	}
	if len(dst) == start {
		return append(dst, in...) // a preference never makes a request unroutable
	}
	return dst
}

// ScorerParams are topology-affinity-scorer's parameters.
type ScorerParams struct {
	TopologyProducerName string `json:"topologyProducerName,omitempty"`
}

// levelScores is the proximity curve, shaped by KV-transfer bandwidth:
// NVLink on one host, one switch in a rack, several hops in a zone,
// between datacenters in a region.
var levelScores = [...]float64{None: 0, Region: 0.02, Zone: 0.05, Rack: 0.2, Host: 1}

// Scorer is topology-affinity-scorer: each candidate scores by the
// tightest domain it shares with the peer endpoint (0 with no peer
// topology).
type Scorer struct {
	scheduling.Named
	params ScorerParams
	x      *Extractor
}

// NewScorer builds a topology-affinity-scorer.
func NewScorer(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
	var p ScorerParams
	if err := scheduling.DecodeParameters(raw, &p, h); err != nil {
		return nil, err
	}
	x, err := extractor(h, ScorerType, p.TopologyProducerName)
	if err != nil {
		return nil, err
	}
	return &Scorer{Named: scheduling.Named{Type: ScorerType, Name: name}, params: p, x: x}, nil
}

// Parameters implements scheduling.ParameterReporter.
func (s *Scorer) Parameters() any { return s.params }

// Score implements scheduling.Scorer.
func (s *Scorer) Score(_ context.Context, cs *scheduling.CycleState, _ *scheduling.Request, eps []*scheduling.Endpoint, scores []float64) {
	p := peer(s.x, cs)
	if !p.Known() {
		return
	}
	for i, e := range eps {
		scores[i] = levelScores[Compare(s.x.Of(e), p)]
	}
}
