package preciseprefix

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/hermod/hermod/libs/openai"
	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/libs/tokenizer"
)

// PromptTokenizer tokenizes requests' prompts as the engine will see them:
// a chat rendered by the model's template without extra special tokens
// (the rendered text carries its own), a completion with them. It holds
// the configured model's tokenizer or, when the configuration names no
// model (as upstream allows), resolves each request's model's.
type PromptTokenizer struct {
	tok    tokenizer.Tokenizer
	tmpl   tokenizer.ChatTemplate
	models *modelTokenizers
	// remote, when set, tokenizes what no local tokenizer can.
	remote *RemoteTokenizer
}

// ErrNoPrompt is Tokenize's answer for a request with no prompt to
// tokenize (neither a chat nor a completion).
var ErrNoPrompt = errors.New("the request has no prompt to tokenize")

// errNoTokenizer is Tokenize's answer for a model without a tokenizer.
var errNoTokenizer = errors.New("no tokenizer for the request's model")

// NewPromptTokenizer resolves cfg's tokenizer through the handle's
// Tokenizers service (default: DefaultTokenizers); without cfg.ModelName
// it resolves them per request, logging to log. With cfg.VLLM, a vLLM
// server's render API tokenizes what no local tokenizer can.
func NewPromptTokenizer(h scheduling.Handle, cfg TokenizersPoolConfig, log *slog.Logger) (*PromptTokenizer, error) {
	var toks Tokenizers = DefaultTokenizers{}
	if t, ok := TokenizerService.Lookup(h); ok {
		toks = t
	}
	pt := &PromptTokenizer{}
	if cfg.VLLM != nil {
		r, err := NewRemoteTokenizer(*cfg.VLLM)
		if err != nil {
			return nil, fmt.Errorf("vllm.%w", err)
		}
		pt.remote = r
	}
	if cfg.ModelName == "" {
		pt.models = newModelTokenizers(toks, cfg, log)
		return pt, nil
	}
	tok, tmpl, err := toks.Tokenizer(cfg)
	switch {
	case err == nil:
		pt.tok, pt.tmpl = tok, tmpl
	case pt.remote != nil:
		h.Warn(fmt.Sprintf("no local tokenizer for %s (%v): the vLLM render API at %s tokenizes every prompt", cfg.ModelName, err, cfg.VLLM.Base()))
	default:
		return nil, err
	}
	return pt, nil
}

// Tokenize appends req's prompt tokens to dst: with the local tokenizer,
// else the remote one, else errNoTokenizer.
func (t *PromptTokenizer) Tokenize(ctx context.Context, dst []uint32, req *scheduling.Request) ([]uint32, error) {
	tok, tmpl := t.tok, t.tmpl
	if t.models != nil {
		var ok bool
		if tok, tmpl, ok = t.models.forModel(req.Model); !ok {
			tok = nil
		}
	}
	if tok == nil {
		if t.remote != nil {
			return t.remote.Tokenize(ctx, dst, req)
		}
		return dst, errNoTokenizer
	}
	switch {
	case req.Body.API.Chat():
		msgs := make([]tokenizer.Message, len(req.Body.Messages))
		for i, m := range req.Body.Messages {
			msgs[i] = tokenizer.Message{Role: m.Role, Content: m.Content}
		}
		text := tmpl.Apply(msgs, true)
		if se, ok := tok.(specialEncoder); ok {
			return se.EncodeWithSpecial(dst, text, false), nil
		}
		return tok.Encode(dst, text), nil
	case req.Body.API == openai.APICompletions:
		return tok.Encode(dst, req.Body.Prompt), nil
	}
	return dst, ErrNoPrompt
}

// specialEncoder is a tokenizer that can leave out its special tokens.
type specialEncoder interface {
	EncodeWithSpecial(dst []uint32, text string, addSpecialTokens bool) []uint32
}
