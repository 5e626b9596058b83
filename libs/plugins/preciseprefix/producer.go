package preciseprefix

import (
	"context"
	"encoding/json"

	"github.com/hermod/hermod/libs/scheduling"
)

// ProducerType is the llm-d router's precise-prefix-cache-producer (v0.9+):
// the KV-event index's answer for a request without a score of its own;
// prefix-cache-scorer reads it (prefixMatchInfoProducerName), as
// no-hit-lru-scorer and the deciders may.
const ProducerType = "precise-prefix-cache-producer"

func init() {
	scheduling.Register(scheduling.Registration{Type: ProducerType, New: NewProducer})
}

// Records reports whether a decision effect of a plugin of type typ says
// which endpoints will hold a prompt's blocks (speculativeIndexing), which
// hermod-indexer counts as held.
func Records(typ string) bool { return typ == Type || typ == ProducerType }

// Producer is precise-prefix-cache-producer: precise-prefix-cache-scorer's
// match, with the same parameters (tokenProcessorConfig, indexerConfig,
// kvEventsConfig, speculativeIndexing, speculativeTTL), and no score.
type Producer struct {
	p *Plugin
}

// NewProducer builds a precise-prefix-cache-producer.
func NewProducer(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
	if name == "" {
		name = ProducerType
	}
	pl, err := New(name, raw, h)
	if err != nil {
		return nil, err
	}
	p := pl.(*Plugin)
	p.Type = ProducerType
	return &Producer{p: p}, nil
}

// TypedName implements scheduling.Plugin.
func (pr *Producer) TypedName() scheduling.TypedName { return pr.p.TypedName() }

// Parameters implements scheduling.ParameterReporter.
func (pr *Producer) Parameters() any { return pr.p.Parameters() }

// PrepareCycle implements scheduling.CyclePreparer.
func (pr *Producer) PrepareCycle(ctx context.Context, cs *scheduling.CycleState, req *scheduling.Request, candidates []*scheduling.Endpoint) {
	pr.p.PrepareCycle(ctx, cs, req, candidates)
}

// MatchPrefix implements scheduling.PrefixMatcher.
func (pr *Producer) MatchPrefix(ctx context.Context, cs *scheduling.CycleState, req *scheduling.Request, candidates []*scheduling.Endpoint) *scheduling.PrefixMatch {
	return pr.p.MatchPrefix(ctx, cs, req, candidates)
}

// PreRequest implements scheduling.PreRequest.
func (pr *Producer) PreRequest(ctx context.Context, cs *scheduling.CycleState, req *scheduling.Request, res *scheduling.Result) {
	pr.p.PreRequest(ctx, cs, req, res)
}

// ResponseComplete implements scheduling.ResponseComplete.
func (pr *Producer) ResponseComplete(ctx context.Context, resp *scheduling.Response) {
	pr.p.ResponseComplete(ctx, resp)
}
