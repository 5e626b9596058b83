// Package tokenize holds the tokenizer prepare-data plugin: it tokenizes
// each request's prompt once, before scheduling, into Request.TokenIDs, so
// that precise-prefix-cache-scorer, the context-length scorer and the P/D
// deciders reuse the ids rather than tokenize again. It fails open: a
// request it cannot tokenize goes on without ids.
package tokenize

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/hermod/hermod/libs/openai"
	"github.com/hermod/hermod/libs/plugins/preciseprefix"
	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/libs/tokenizer"
)

// Type is the registered plugin type.
const Type = "tokenizer"

func init() {
	scheduling.Register(scheduling.Registration{Type: Type, Gate: scheduling.GatePrepareDataPlugins, New: New})
}

// Params are the plugin's parameters (reference/001).
type Params struct {
	// ModelName is the model whose tokenizer to use (required).
	ModelName string `json:"modelName"`
	// UDSTokenizerConfig names an external tokenizer service; Hermod
	// tokenizes in process and ignores it (with a warning).
	UDSTokenizerConfig *struct {
		SocketFile string `json:"socketFile"`
	} `json:"udsTokenizerConfig"`
}

// Plugin is the tokenizer prepare-data plugin.
type Plugin struct {
	scheduling.Named
	params Params
	tok    tokenizer.Tokenizer
	tmpl   tokenizer.ChatTemplate
}

// New builds the plugin; it resolves the tokenizer as
// precise-prefix-cache-scorer does (the picker's --tokenizer override, or
// the model's local Hugging Face files).
func New(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
	var p Params
	if err := scheduling.DecodeParameters(raw, &p, h); err != nil {
		return nil, err
	}
	if p.ModelName == "" {
		return nil, scheduling.ParamErrorf("modelName", "required: the model whose tokenizer prompts are tokenized with")
	}
	if p.UDSTokenizerConfig != nil {
		h.Warn("udsTokenizerConfig: Hermod tokenizes in process; the socket is not used")
	}
	var toks preciseprefix.Tokenizers = preciseprefix.DefaultTokenizers{}
	if t, ok := preciseprefix.TokenizerService.Lookup(h); ok {
		toks = t
	}
	tok, tmpl, err := toks.Tokenizer(preciseprefix.TokenizersPoolConfig{ModelName: p.ModelName})
	if err != nil {
		return nil, scheduling.ParamErrorf("modelName", "%v", err)
	}
	if name == "" {
		name = Type
	}
	return &Plugin{Named: scheduling.Named{Type: Type, Name: name}, params: p, tok: tok, tmpl: tmpl}, nil
}

// Parameters implements scheduling.ParameterReporter.
func (p *Plugin) Parameters() any { return p.params }

// errNoPrompt is returned for a request with nothing to tokenize.
var errNoPrompt = errors.New("the request has no prompt to tokenize")

// PrepareData implements scheduling.PrepareData: the prompt's token ids,
// as the engine will see them (a chat rendered by the model's template,
// without extra special tokens; a completion with them).
func (p *Plugin) PrepareData(_ context.Context, req *scheduling.Request) error {
	if len(req.TokenIDs) > 0 {
		return nil // the client sent token ids
	}
	switch req.Body.API {
	case openai.APIChatCompletions:
		msgs := make([]tokenizer.Message, len(req.Body.Messages))
		for i, m := range req.Body.Messages {
			msgs[i] = tokenizer.Message{Role: m.Role, Content: m.Content}
		}
		text := p.tmpl.Apply(msgs, true)
		if t, ok := p.tok.(interface {
			EncodeWithSpecial([]uint32, string, bool) []uint32
		}); ok {
			req.TokenIDs = t.EncodeWithSpecial(nil, text, false)
		} else {
			req.TokenIDs = p.tok.Encode(nil, text)
		}
	case openai.APICompletions:
		req.TokenIDs = p.tok.Encode(nil, req.Body.Prompt)
	default:
		return errNoPrompt
	}
	return nil
}
