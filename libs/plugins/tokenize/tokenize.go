// Package tokenize holds the tokenizer prepare-data plugin: it tokenizes
// each request's prompt once, before scheduling, into Request.TokenIDs, so
// that precise-prefix-cache-scorer, the context-length scorer and the P/D
// deciders reuse the ids rather than tokenize again. It fails open: a
// request it cannot tokenize goes on without ids.
//
// It is registered twice: as "tokenizer" (GIE's prepare-data plugin,
// behind featureGates: [prepareDataPlugins]) and as "token-producer" (the
// name llm-d gives it now, with no gate).
package tokenize

import (
	"context"
	"encoding/json"

	"github.com/hermod/hermod/libs/plugins/preciseprefix"
	"github.com/hermod/hermod/libs/scheduling"
)

// Type and ProducerType are the registered plugin types.
const (
	Type         = "tokenizer"
	ProducerType = "token-producer"
)

func init() {
	scheduling.Register(scheduling.Registration{Type: Type, Gate: scheduling.GatePrepareDataPlugins, New: newOf(Type)})
	scheduling.Register(scheduling.Registration{Type: ProducerType, New: newOf(ProducerType)})
}

// Params are the plugin's parameters (reference/001, and llm-d's
// token-producer).
type Params struct {
	// ModelName is the model whose tokenizer to use; empty: each
	// request's model.
	ModelName string `json:"modelName"`
	// UDSTokenizerConfig names an external tokenizer service; Hermod does
	// not use it (with a warning). VLLM is a vLLM server whose render API
	// tokenizes the prompts no local tokenizer can.
	UDSTokenizerConfig *struct {
		SocketFile string `json:"socketFile"`
	} `json:"udsTokenizerConfig"`
	VLLM *preciseprefix.VLLMConfig `json:"vllm"`
}

// Plugin is the tokenizer prepare-data plugin.
type Plugin struct {
	scheduling.Named
	params  Params
	prompts *preciseprefix.PromptTokenizer
}

// newOf returns the factory of the plugin registered as typ; it resolves
// the tokenizer as precise-prefix-cache-scorer does (the picker's
// --tokenizer override, or the model's local Hugging Face files).
func newOf(typ string) scheduling.Factory {
	return func(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
		var p Params
		if err := scheduling.DecodeParameters(raw, &p, h); err != nil {
			return nil, err
		}
		if p.UDSTokenizerConfig != nil {
			h.Warn("udsTokenizerConfig: Hermod tokenizes in process; the socket is not used")
		}
		if p.ModelName == "" {
			h.Warn("modelName is not set: each request's model selects the tokenizer its prompt is tokenized with")
		}
		if name == "" {
			name = typ
		}
		prompts, err := preciseprefix.NewPromptTokenizer(h, preciseprefix.TokenizersPoolConfig{ModelName: p.ModelName, VLLM: p.VLLM}, h.Logger().With("plugin", name))
		if err != nil {
			return nil, scheduling.ParamErrorf("modelName", "%v", err)
		}
		return &Plugin{Named: scheduling.Named{Type: typ, Name: name}, params: p, prompts: prompts}, nil
	}
}

// Parameters implements scheduling.ParameterReporter.
func (p *Plugin) Parameters() any { return p.params }

// PrepareData implements scheduling.PrepareData: the prompt's token ids,
// as the engine will see them (a chat rendered by the model's template,
// without extra special tokens; a completion with them).
func (p *Plugin) PrepareData(ctx context.Context, req *scheduling.Request) error {
	if len(req.TokenIDs) > 0 {
		return nil // the client sent token ids
	}
	ids, err := p.prompts.Tokenize(ctx, nil, req)
	if err != nil {
		return err
	}
	req.TokenIDs = ids
	return nil
}
