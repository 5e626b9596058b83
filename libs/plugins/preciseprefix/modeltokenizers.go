package preciseprefix

import (
	"log/slog"
	"sync"

	"github.com/hermod/hermod/libs/tokenizer"
)

// maxModels bounds how many models' tokenizers a modelTokenizers keeps:
// request bodies name the model, so the set is the clients' to grow.
const maxModels = 256

// modelTokenizers resolves the tokenizer of each request's model, for a
// configuration that names none (tokenizersPoolConfig.modelName unset, as
// upstream allows): each model's is loaded once, on its first request,
// outside any shared lock, and a model without one is logged once.
type modelTokenizers struct {
	toks Tokenizers
	cfg  TokenizersPoolConfig
	log  *slog.Logger

	mu      sync.Mutex
	byModel map[string]*modelTokenizer
}

type modelTokenizer struct {
	once sync.Once
	tok  tokenizer.Tokenizer
	tmpl tokenizer.ChatTemplate
	err  error
}

func newModelTokenizers(toks Tokenizers, cfg TokenizersPoolConfig, log *slog.Logger) *modelTokenizers {
	return &modelTokenizers{toks: toks, cfg: cfg, log: log, byModel: map[string]*modelTokenizer{}}
}

// forModel returns model's tokenizer and chat template; ok is false when
// there is none (the request then matches no blocks).
func (m *modelTokenizers) forModel(model string) (tokenizer.Tokenizer, tokenizer.ChatTemplate, bool) {
	m.mu.Lock()
	e, ok := m.byModel[model]
	if !ok {
		e = &modelTokenizer{}
		if len(m.byModel) < maxModels {
			m.byModel[model] = e
		}
	}
	m.mu.Unlock()
	e.once.Do(func() {
		cfg := m.cfg
		cfg.ModelName = model
		e.tok, e.tmpl, e.err = m.toks.Tokenizer(cfg)
		if e.err != nil {
			m.log.Warn("no tokenizer for the request's model: its prompts match no cached blocks", "model", model, "error", e.err)
		}
	})
	return e.tok, e.tmpl, e.err == nil
}
