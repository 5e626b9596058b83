// Package decider holds the deciders disaggregating profile handlers
// consult: prefix-based-pd-decider, always-disagg-pd-decider (prefill) and
// always-disagg-multimodal-decider (encode).
package decider

import (
	"context"
	"encoding/json"

	"github.com/hermod/hermod/libs/scheduling"
)

// Registered plugin types.
const (
	PrefixBasedType = "prefix-based-pd-decider"
	AlwaysPDType    = "always-disagg-pd-decider"
	MultimodalType  = "always-disagg-multimodal-decider"
)

// charsPerToken estimates prompt tokens from prompt bytes when no
// tokenizer ran.
const charsPerToken = 4

func init() {
	scheduling.Register(scheduling.Registration{Type: PrefixBasedType, New: newPrefixBased})
	scheduling.Register(scheduling.Registration{Type: AlwaysPDType, New: func(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
		if err := noParams(raw, h); err != nil {
			return nil, err
		}
		return &AlwaysPD{scheduling.Named{Type: AlwaysPDType, Name: name}}, nil
	}})
	scheduling.Register(scheduling.Registration{Type: MultimodalType, New: func(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
		if err := noParams(raw, h); err != nil {
			return nil, err
		}
		return &Multimodal{scheduling.Named{Type: MultimodalType, Name: name}}, nil
	}})
}

func noParams(raw json.RawMessage, h scheduling.Handle) error {
	var none struct{}
	return scheduling.DecodeParameters(raw, &none, h)
}

// PrefixBasedParams are prefix-based-pd-decider's parameters.
type PrefixBasedParams struct {
	// NonCachedTokens is the least number of prompt tokens not cached on the
	// decode pod that justifies a separate prefill; 0 never disaggregates.
	NonCachedTokens int `json:"nonCachedTokens"`
}

// PrefixBased disaggregates when promptTokens - cachedTokensOnDecodePod >=
// nonCachedTokens (> 0). Prompt tokens are the tokenized length, or the
// prompt bytes / 4; cached tokens are the decode pod's matched prefix blocks
// x block size from the cycle's prefix match (none: nothing cached).
type PrefixBased struct {
	scheduling.Named
	params PrefixBasedParams
}

func newPrefixBased(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
	var p PrefixBasedParams
	if err := scheduling.DecodeParameters(raw, &p, h); err != nil {
		return nil, err
	}
	if p.NonCachedTokens < 0 {
		return nil, scheduling.ParamErrorf("nonCachedTokens", "must not be negative (got %d)", p.NonCachedTokens)
	}
	return &PrefixBased{Named: scheduling.Named{Type: PrefixBasedType, Name: name}, params: p}, nil
}

// Parameters implements scheduling.ParameterReporter.
func (d *PrefixBased) Parameters() any { return d.params }

// ShouldPrefill implements scheduling.PrefillDecider.
func (d *PrefixBased) ShouldPrefill(_ context.Context, cs *scheduling.CycleState, req *scheduling.Request, decode scheduling.Target) bool {
	if d.params.NonCachedTokens <= 0 || decode.Endpoint == nil {
		return false
	}
	prompt := len(req.TokenIDs)
	if prompt == 0 {
		prompt = len(req.PrefixText()) / charsPerToken
	}
	cached := 0
	if m, ok := scheduling.ReadState[*scheduling.PrefixMatch](cs, scheduling.PrefixMatchKey); ok {
		cached = m.CachedTokens(decode.Endpoint.Name)
	}
	return prompt-cached >= d.params.NonCachedTokens
}

// AlwaysPD sends every request through a prefill stage.
type AlwaysPD struct{ scheduling.Named }

// ShouldPrefill implements scheduling.PrefillDecider.
func (AlwaysPD) ShouldPrefill(context.Context, *scheduling.CycleState, *scheduling.Request, scheduling.Target) bool {
	return true
}

// Multimodal sends requests with image, audio or video content through an
// encode stage.
type Multimodal struct{ scheduling.Named }

// ShouldEncode implements scheduling.EncodeDecider.
func (Multimodal) ShouldEncode(_ context.Context, _ *scheduling.CycleState, req *scheduling.Request) bool {
	return req.Media() != 0
}
