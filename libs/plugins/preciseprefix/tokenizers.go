package preciseprefix

import (
	"context"
	"errors"
	"fmt"

	indexerv1 "github.com/hermod/hermod/libs/api/hermod/indexer/v1"
	"github.com/hermod/hermod/libs/tokenizer"
)

// BuiltinModel names Hermod's built-in tokenizer (the one vllm-sim uses),
// for fleets of simulated pods.
const BuiltinModel = "builtin"

// DefaultTokenizers resolves "builtin" to the built-in tokenizer and the
// Llama 3 chat template.
type DefaultTokenizers struct{}

// Tokenizer implements Tokenizers.
func (DefaultTokenizers) Tokenizer(cfg TokenizersPoolConfig) (tokenizer.Tokenizer, tokenizer.ChatTemplate, error) {
	if cfg.ModelName == BuiltinModel {
		return tokenizer.Builtin{}, tokenizer.Llama3Template{}, nil
	}
	return nil, nil, fmt.Errorf("no tokenizer for model %q in this build (use %q for simulated pods, or run the picker with --tokenizer %s)", cfg.ModelName, BuiltinModel, BuiltinModel)
}

// Fixed resolves every configuration to one tokenizer (the picker's
// --tokenizer override).
type Fixed struct {
	Tok  tokenizer.Tokenizer
	Tmpl tokenizer.ChatTemplate
}

// Tokenizer implements Tokenizers.
func (f Fixed) Tokenizer(TokenizersPoolConfig) (tokenizer.Tokenizer, tokenizer.ChatTemplate, error) {
	return f.Tok, f.Tmpl, nil
}

// Offline is an indexer that cannot be reached: configurations validated
// away from a running pool (hermodctl config validate) load with it.
type Offline struct{}

// Score implements Indexer.
func (Offline) Score(context.Context, *indexerv1.ScoreRequest) (*indexerv1.ScoreResponse, error) {
	return nil, errors.New("no indexer: the configuration was loaded for validation only")
}
