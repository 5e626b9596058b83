// Package inflightload holds inflight-load-producer, the llm-d router's
// producer of every endpoint's in-flight load (v0.9+): the requests routed
// to it and not finished, and their tokens; and token-load-scorer, which
// scores by those tokens. active-request-scorer, utilization-filter and
// concurrency-detector read the same load.
//
// The load is a projection of the decision and completion streams, as
// every stateful plugin's here: each picker replica counts every
// replica's decisions. A request's tokens are its uncached prompt tokens
// on that endpoint (the prompt's estimated tokens less those its prefix
// producer says the endpoint holds) and, with addEstimatedOutputTokens,
// the output it is expected to write; they count until the request
// completes (upstream drops the prompt's at the first streamed token, an
// event the streams do not carry) or its requestTimeout passes.
package inflightload

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"time"

	"github.com/hermod/hermod/libs/plugins/flight"
	"github.com/hermod/hermod/libs/scheduling"
)

// Registered plugin types.
const (
	ProducerType  = "inflight-load-producer"
	TokenLoadType = "token-load-scorer"
)

// Defaults.
const (
	DefaultOutputRatio    = 1.5
	DefaultRequestTimeout = 10 * time.Minute
	// CharsPerToken estimates a prompt's tokens from its characters when it
	// is not tokenized (upstream's estimate packs 4 bytes in a token).
	CharsPerToken = 4
	// DefaultQueueThresholdTokens is the in-flight tokens at which
	// token-load-scorer scores 0.
	DefaultQueueThresholdTokens = 4 << 20
	// prefixProducer is the producer whose match discounts cached tokens
	// when prefixMatchInfoProducerName names none (if one is declared).
	prefixProducer = "approx-prefix-cache-producer"
)

func init() {
	scheduling.Register(scheduling.Registration{Type: ProducerType, New: NewProducer})
	scheduling.Register(scheduling.Registration{Type: TokenLoadType, New: NewTokenLoadScorer})
}

// Params are inflight-load-producer's effective parameters.
type Params struct {
	AddEstimatedOutputTokens bool    `json:"addEstimatedOutputTokens"`
	OutputRatio              float64 `json:"outputRatio"`
	// MaxEstimatedOutputTokens caps the output estimate (nil: no cap).
	MaxEstimatedOutputTokens    *int64 `json:"maxEstimatedOutputTokens,omitempty"`
	PrefixMatchInfoProducerName string `json:"prefixMatchInfoProducerName,omitempty"`
	// RequestTimeout is how long a request counts without a completion
	// (its completion lost, its engine gone).
	RequestTimeout scheduling.Duration `json:"requestTimeout"`
}

type wireParams struct {
	AddEstimatedOutputTokens    bool                 `json:"addEstimatedOutputTokens"`
	OutputRatio                 *float64             `json:"outputRatio"`
	MaxEstimatedOutputTokens    *int64               `json:"maxEstimatedOutputTokens"`
	PrefixMatchInfoProducerName string               `json:"prefixMatchInfoProducerName"`
	SyncCrossReplicaState       *bool                `json:"syncCrossReplicaState"`
	RequestTimeout              *scheduling.Duration `json:"requestTimeout"`
}

// maxEndpoints is how many endpoints one decision loads (decode, prefill,
// encode and a spare).
const maxEndpoints = 4

// load is one request's tokens on each endpoint it occupies.
type load struct {
	n      uint8
	hashes [maxEndpoints]uint64
	tokens [maxEndpoints]int64
}

// Producer is inflight-load-producer.
type Producer struct {
	scheduling.Named
	params  Params
	prefix  scheduling.PrefixMatcher // nil: no cached tokens are discounted
	tracker *flight.Tracker[uint64, load, struct{}]
	now     func() time.Time
}

// NewProducer builds an inflight-load-producer.
func NewProducer(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
	var w wireParams
	if err := scheduling.DecodeParameters(raw, &w, h); err != nil {
		return nil, err
	}
	p := Params{AddEstimatedOutputTokens: w.AddEstimatedOutputTokens, OutputRatio: DefaultOutputRatio,
		MaxEstimatedOutputTokens: w.MaxEstimatedOutputTokens, PrefixMatchInfoProducerName: w.PrefixMatchInfoProducerName,
		RequestTimeout: scheduling.Duration(DefaultRequestTimeout)}
	if w.OutputRatio != nil {
		if *w.OutputRatio < 0 || math.IsNaN(*w.OutputRatio) || math.IsInf(*w.OutputRatio, 0) {
			return nil, scheduling.ParamErrorf("outputRatio", "must not be negative (got %v)", *w.OutputRatio)
		}
		p.OutputRatio = *w.OutputRatio
	}
	if m := w.MaxEstimatedOutputTokens; m != nil && *m < 0 {
		return nil, scheduling.ParamErrorf("maxEstimatedOutputTokens", "must not be negative (got %d)", *m)
	}
	if w.RequestTimeout != nil {
		if *w.RequestTimeout <= 0 {
			return nil, scheduling.ParamErrorf("requestTimeout", "must be positive (got %s)", w.RequestTimeout.Std())
		}
		p.RequestTimeout = *w.RequestTimeout
	}
	if w.SyncCrossReplicaState != nil && !*w.SyncCrossReplicaState {
		h.Warn("parameters.syncCrossReplicaState: false changes nothing: every picker replica counts every replica's decisions (the decision stream)")
	}
	pr := &Producer{Named: scheduling.Named{Type: ProducerType, Name: name}, params: p,
		tracker: flight.NewTracker[uint64, load, struct{}](p.RequestTimeout.Std(), h.Now), now: h.Now}
	ref := p.PrefixMatchInfoProducerName
	if ref == "" {
		ref = prefixProducer
	}
	switch src, err := h.Plugin(ref); {
	case err == nil:
		m, ok := src.(scheduling.PrefixMatcher)
		if !ok {
			return nil, scheduling.ParamErrorf("prefixMatchInfoProducerName", "plugin %q (type %s) produces no prefix match", ref, src.TypedName().Type)
		}
		pr.prefix = m
	case p.PrefixMatchInfoProducerName != "" || !errors.Is(err, scheduling.ErrNotDeclared):
		return nil, scheduling.ParamErrorf("prefixMatchInfoProducerName", "%v", err)
	}
	return pr, nil
}

// Parameters implements scheduling.ParameterReporter.
func (p *Producer) Parameters() any { return p.params }

// InFlightLoad implements scheduling.InFlightLoader.
func (p *Producer) InFlightLoad(e *scheduling.Endpoint) scheduling.InFlightLoad {
	h := e.NameHash()
	var l scheduling.InFlightLoad
	p.tracker.Each(h, func(_ time.Duration, s *load) {
		l.Requests++
		for i := range s.n {
			if s.hashes[i] == h {
				l.Tokens += s.tokens[i]
			}
		}
	})
	return l
}

// PreRequest implements scheduling.PreRequest: the decision loads the
// target of every profile that picked one with a request and its tokens
// there (recorded as an effect, applied by ApplyEffect).
func (p *Producer) PreRequest(ctx context.Context, cs *scheduling.CycleState, req *scheduling.Request, res *scheduling.Result) {
	prompt := int64(math.Ceil(req.EstimatedTokens(1.0 / CharsPerToken)))
	output := p.estimatedOutput(req, prompt)
	var names [maxEndpoints]string
	var values [maxEndpoints]float64
	n := 0
	for _, pr := range res.Profiles {
		t, ok := pr.Target()
		if !ok || pr.Err != nil || n == maxEndpoints {
			continue
		}
		dup := false
		for _, name := range names[:n] {
			dup = dup || name == t.Endpoint.Name
		}
		if dup {
			continue
		}
		uncached := prompt
		if p.prefix != nil {
			if m := p.prefix.MatchPrefix(ctx, cs, req, pr.Endpoints); m != nil {
				uncached = max(0, prompt-int64(m.BlocksOf(t.Endpoint)*m.BlockSizeTokens))
			}
		}
		names[n], values[n] = t.Endpoint.Name, float64(uncached+output)
		n++
	}
	if n > 0 {
		res.Record(scheduling.Effect{Plugin: p.TypedName(), Endpoints: names[:n], Values: values[:n]})
	}
}

// estimatedOutput is the output a request is expected to write: its
// prompt x outputRatio, within what the client allows and
// maxEstimatedOutputTokens; 0 unless addEstimatedOutputTokens.
func (p *Producer) estimatedOutput(req *scheduling.Request, prompt int64) int64 {
	if !p.params.AddEstimatedOutputTokens {
		return 0
	}
	out := int64(math.Round(float64(prompt) * p.params.OutputRatio))
	if m := int64(req.Body.MaxTokens); m > 0 {
		out = min(out, m)
	}
	if m := p.params.MaxEstimatedOutputTokens; m != nil {
		out = min(out, *m)
	}
	return out
}

// ApplyEffect implements scheduling.Projection.
func (p *Producer) ApplyEffect(decisionID uint64, at time.Time, e *scheduling.Effect) {
	var l load
	for i, name := range e.Endpoints {
		if i == maxEndpoints {
			break
		}
		l.hashes[i] = scheduling.NameHash(name)
		if i < len(e.Values) && e.Values[i] > 0 {
			l.tokens[i] = int64(e.Values[i])
		}
		l.n++
	}
	if at.IsZero() {
		at = p.now()
	}
	p.tracker.StartWith(decisionID, e.Endpoints[:l.n], at, l)
}

// ResponseComplete implements scheduling.ResponseComplete.
func (p *Producer) ResponseComplete(_ context.Context, resp *scheduling.Response) {
	p.tracker.Done(resp.DecisionID)
}

// StateRetention implements scheduling.StateRetainer.
func (p *Producer) StateRetention() time.Duration { return p.params.RequestTimeout.Std() }

// InheritState implements scheduling.StateInheritor: the requests in
// flight stay counted (their tokens as they were estimated).
func (p *Producer) InheritState(prev scheduling.Plugin) bool {
	q, ok := prev.(*Producer)
	if !ok {
		return false
	}
	q.tracker.SetTimeout(p.params.RequestTimeout.Std())
	p.tracker = q.tracker
	return true
}

// Loader finds the in-flight load a consumer reads: the plugin name
// names (inFlightLoadProducerName), else the pool's default producer (the
// first inflight-load-producer declared before it, else one made for all
// such consumers).
func Loader(h scheduling.Handle, name string) (scheduling.InFlightLoader, error) {
	var (
		p   scheduling.Plugin
		err error
	)
	if name != "" {
		p, err = h.Plugin(name)
	} else {
		p, err = h.DefaultPlugin(ProducerType)
	}
	if err != nil {
		return nil, scheduling.ParamErrorf("inFlightLoadProducerName", "%v", err)
	}
	l, ok := p.(scheduling.InFlightLoader)
	if !ok {
		return nil, scheduling.ParamErrorf("inFlightLoadProducerName", "plugin %q (type %s) produces no in-flight load", name, p.TypedName().Type)
	}
	return l, nil
}

// TokenLoad is token-load-scorer: 1 - min(1, in-flight tokens /
// queueThresholdTokens).
type TokenLoad struct {
	scheduling.Named
	params TokenLoadParams
	load   scheduling.InFlightLoader
}

// TokenLoadParams are token-load-scorer's parameters.
type TokenLoadParams struct {
	QueueThresholdTokens     int64  `json:"queueThresholdTokens"`
	InFlightLoadProducerName string `json:"inFlightLoadProducerName,omitempty"`
}

// NewTokenLoadScorer builds a token-load-scorer.
func NewTokenLoadScorer(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
	p := TokenLoadParams{QueueThresholdTokens: DefaultQueueThresholdTokens}
	if err := scheduling.DecodeParameters(raw, &p, h); err != nil {
		return nil, err
	}
	if p.QueueThresholdTokens < 1 {
		return nil, scheduling.ParamErrorf("queueThresholdTokens", "must be at least 1 (got %d)", p.QueueThresholdTokens)
	}
	l, err := Loader(h, p.InFlightLoadProducerName)
	if err != nil {
		return nil, err
	}
	return &TokenLoad{Named: scheduling.Named{Type: TokenLoadType, Name: name}, params: p, load: l}, nil
}

// Parameters implements scheduling.ParameterReporter.
func (s *TokenLoad) Parameters() any { return s.params }

// Score implements scheduling.Scorer.
func (s *TokenLoad) Score(_ context.Context, _ *scheduling.CycleState, _ *scheduling.Request, eps []*scheduling.Endpoint, scores []float64) {
	for i, e := range eps {
		scores[i] = 1 - math.Min(1, float64(s.load.InFlightLoad(e).Tokens)/float64(s.params.QueueThresholdTokens))
	}
}
