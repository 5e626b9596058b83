package predictedlatency

import (
	"encoding/json"
	"time"

	"github.com/hermod/hermod/libs/scheduling"
)

// Params are predicted-latency-scorer's parameters: the upstream scorer's
// names where they mean something here, and Hermod's own.
type Params struct {
	// ContextTTL is how long a request counts as in flight without a
	// completion (upstream: the per-request context's TTL). Default 5m.
	ContextTTL scheduling.Duration `json:"contextTTL"`
	// TrainingWindow is how far back finished requests teach the model
	// (Hermod). Default 10m; a restarted replica replays at least this
	// much of the streams to rebuild the same model.
	TrainingWindow scheduling.Duration `json:"trainingWindow"`
	// SamplesPerEndpoint is how many of each endpoint's newest finished
	// requests the model keeps (Hermod). Default 512.
	SamplesPerEndpoint int `json:"samplesPerEndpoint"`
	// PrefixPluginName names the prefix-cache plugin (declared earlier)
	// whose match says how much of a prompt an endpoint holds (Hermod;
	// upstream: prefixMatchInfoProducerName). Default: the first prefix
	// plugin declared earlier, if any.
	PrefixPluginName string `json:"prefixPluginName"`
	// PrefixMatchInfoProducerName is upstream's name for PrefixPluginName.
	PrefixMatchInfoProducerName string `json:"prefixMatchInfoProducerName"`

	// SLOBufferFactor multiplies the request's TPOT SLO before headroom is
	// computed. Default 1.
	SLOBufferFactor float64 `json:"sloBufferFactor"`
	// HeadroomTTFTWeight and HeadroomTPOTWeight blend the normalised TTFT
	// and TPOT headroom of the endpoints that meet the SLO. Default 0.8,
	// 0.2.
	HeadroomTTFTWeight float64 `json:"headroomTTFTWeight"`
	HeadroomTPOTWeight float64 `json:"headroomTPOTWeight"`
	// NegHeadroomTTFTWeight and NegHeadroomTPOTWeight blend the normalised
	// deficits when no endpoint meets it. Default 0.8, 0.2.
	NegHeadroomTTFTWeight float64 `json:"negHeadroomTTFTWeight"`
	NegHeadroomTPOTWeight float64 `json:"negHeadroomTPOTWeight"`
	// HeadroomSelectionStrategy is how the endpoints that meet the SLO
	// rank: "least" (the least headroom first: pack requests tightly and
	// keep the fast endpoints' slack for tighter SLOs), "most" (the most
	// headroom first), or the composite strategies "composite-least",
	// "composite-most" and "composite-only" (rank by the composite of
	// free KV cache, queue and prefix hit instead of headroom). Default
	// "least".
	HeadroomSelectionStrategy string `json:"headroomSelectionStrategy"`
	// CompositeKVWeight, CompositeQueueWeight and CompositePrefixWeight
	// weigh the composite score's terms. Default 1 each.
	CompositeKVWeight     float64 `json:"compositeKVWeight"`
	CompositeQueueWeight  float64 `json:"compositeQueueWeight"`
	CompositePrefixWeight float64 `json:"compositePrefixWeight"`
	// AffinityGateTauGlobal: when some endpoint holds at least this
	// fraction of the prompt, only such endpoints are scored (unless their
	// best predicted TTFT is AffinityMaxTTFTPenaltyMs worse than the best
	// overall). AffinityGateTau is the same gate within the chosen tier.
	// Defaults 0.99 and 0.80; 0 or more than 1 turns a gate off.
	AffinityGateTauGlobal    float64 `json:"affinityGateTauGlobal"`
	AffinityGateTau          float64 `json:"affinityGateTau"`
	AffinityMaxTTFTPenaltyMs float64 `json:"affinityMaxTTFTPenaltyMs"`
	// EpsilonExploreSticky is the probability that a request skips the
	// affinity gates; EpsilonExploreNeg the probability that it is scored
	// among the endpoints that miss the SLO although some meet it (the
	// model keeps learning about them). Default 0.01 each.
	EpsilonExploreSticky float64 `json:"epsilonExploreSticky"`
	EpsilonExploreNeg    float64 `json:"epsilonExploreNeg"`
	// EndpointRoleLabel is the label whose value "prefill" marks prefill
	// endpoints: they produce no output tokens, so their TPOT does not
	// count. Default "" (none).
	EndpointRoleLabel string `json:"endpointRoleLabel"`
	// StreamingMode false ignores TPOT SLOs (upstream's non-streaming
	// mode). Otherwise a TPOT SLO applies to streamed requests, whose
	// clients see the tokens' pace. Either way the model learns from
	// streamed and unstreamed requests alike.
	StreamingMode *bool `json:"streamingMode,omitempty"`

	// Accepted from upstream, without effect here (a warning says so).
	SamplingMean     *float64        `json:"samplingMean,omitempty"`
	MaxSampledTokens *int            `json:"maxSampledTokens,omitempty"`
	SelectionMode    *string         `json:"selectionMode,omitempty"`
	PredictInProduce json.RawMessage `json:"predictInProduce,omitempty"`
}

// Defaults.
const (
	DefaultContextTTL         = 5 * time.Minute
	DefaultTrainingWindow     = 10 * time.Minute
	DefaultSamplesPerEndpoint = 512
)

// Selection strategies.
const (
	StrategyLeast          = "least"
	StrategyMost           = "most"
	StrategyCompositeLeast = "composite-least"
	StrategyCompositeMost  = "composite-most"
	StrategyCompositeOnly  = "composite-only"
)

func defaultParams() Params {
	return Params{
		ContextTTL:                scheduling.Duration(DefaultContextTTL),
		TrainingWindow:            scheduling.Duration(DefaultTrainingWindow),
		SamplesPerEndpoint:        DefaultSamplesPerEndpoint,
		SLOBufferFactor:           1,
		HeadroomTTFTWeight:        0.8,
		HeadroomTPOTWeight:        0.2,
		NegHeadroomTTFTWeight:     0.8,
		NegHeadroomTPOTWeight:     0.2,
		HeadroomSelectionStrategy: StrategyLeast,
		CompositeKVWeight:         1,
		CompositeQueueWeight:      1,
		CompositePrefixWeight:     1,
		AffinityGateTauGlobal:     0.99,
		AffinityGateTau:           0.80,
		AffinityMaxTTFTPenaltyMs:  5000,
		EpsilonExploreSticky:      0.01,
		EpsilonExploreNeg:         0.01,
	}
}

func decodeParams(raw json.RawMessage, h scheduling.Handle) (Params, error) {
	p := defaultParams()
	if err := scheduling.DecodeParameters(raw, &p, h); err != nil {
		return p, err
	}
	switch {
	case p.ContextTTL <= 0:
		return p, scheduling.ParamErrorf("contextTTL", "must be positive (got %s)", p.ContextTTL.Std())
	case p.TrainingWindow <= 0:
		return p, scheduling.ParamErrorf("trainingWindow", "must be positive (got %s)", p.TrainingWindow.Std())
	case p.SamplesPerEndpoint < 1:
		return p, scheduling.ParamErrorf("samplesPerEndpoint", "must be at least 1 (got %d)", p.SamplesPerEndpoint)
	case p.SLOBufferFactor <= 0:
		return p, scheduling.ParamErrorf("sloBufferFactor", "must be positive (got %v)", p.SLOBufferFactor)
	case p.AffinityMaxTTFTPenaltyMs < 0:
		return p, scheduling.ParamErrorf("affinityMaxTTFTPenaltyMs", "must not be negative (got %v)", p.AffinityMaxTTFTPenaltyMs)
	}
	for _, w := range []struct {
		name string
		v    float64
	}{
		{"headroomTTFTWeight", p.HeadroomTTFTWeight}, {"headroomTPOTWeight", p.HeadroomTPOTWeight},
		{"negHeadroomTTFTWeight", p.NegHeadroomTTFTWeight}, {"negHeadroomTPOTWeight", p.NegHeadroomTPOTWeight},
		{"compositeKVWeight", p.CompositeKVWeight}, {"compositeQueueWeight", p.CompositeQueueWeight}, {"compositePrefixWeight", p.CompositePrefixWeight},
	} {
		if w.v < 0 {
			return p, scheduling.ParamErrorf(w.name, "must not be negative (got %v)", w.v)
		}
	}
	for _, e := range []struct {
		name string
		v    float64
	}{{"epsilonExploreSticky", p.EpsilonExploreSticky}, {"epsilonExploreNeg", p.EpsilonExploreNeg}, {"affinityGateTau", p.AffinityGateTau}, {"affinityGateTauGlobal", p.AffinityGateTauGlobal}} {
		if e.v < 0 || e.v > 1 {
			return p, scheduling.ParamErrorf(e.name, "must be between 0 and 1 (got %v)", e.v)
		}
	}
	switch p.HeadroomSelectionStrategy {
	case StrategyLeast, StrategyMost, StrategyCompositeLeast, StrategyCompositeMost, StrategyCompositeOnly:
	default:
		return p, scheduling.ParamErrorf("headroomSelectionStrategy", "must be one of least, most, composite-least, composite-most, composite-only (got %q)", p.HeadroomSelectionStrategy)
	}
	if p.PrefixPluginName == "" {
		p.PrefixPluginName = p.PrefixMatchInfoProducerName
	} else if p.PrefixMatchInfoProducerName != "" && p.PrefixMatchInfoProducerName != p.PrefixPluginName {
		return p, scheduling.ParamErrorf("prefixMatchInfoProducerName", "names %q but prefixPluginName names %q; set one", p.PrefixMatchInfoProducerName, p.PrefixPluginName)
	}
	if p.SamplingMean != nil || p.MaxSampledTokens != nil {
		h.Warn("parameters.samplingMean and maxSampledTokens are ignored: the model learns from every finished request's measured TTFT and TPOT")
	}
	if p.SelectionMode != nil {
		h.Warn("parameters.selectionMode is ignored: the profile's picker chooses (max-score-picker takes the best, weighted-random-picker draws by score)")
	}
	if len(p.PredictInProduce) > 0 {
		h.Warn("parameters.predictInProduce is ignored: predictions are made in process for every request")
	}
	return p, nil
}

// streaming reports whether TPOT SLOs apply.
func (p *Params) streaming() bool { return p.StreamingMode == nil || *p.StreamingMode }
