package preciseprefix

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	indexerv1 "github.com/hermod/hermod/libs/api/hermod/indexer/v1"
	"github.com/hermod/hermod/libs/tokenizer"
	"github.com/hermod/hermod/libs/tokenizer/hf"
	"github.com/hermod/hermod/libs/tokenizer/hf/chattemplate"
)

// BuiltinModel names Hermod's built-in tokenizer (the one vllm-sim uses),
// for fleets of simulated pods.
const BuiltinModel = "builtin"

// DefaultTokenizers resolves "builtin" to the built-in tokenizer and the
// Llama 3 chat template, and any other model to Hugging Face files on
// local disk (tokenizersPoolConfig.local): the tokenizer.json and the
// tokenizer_config.json beside it (its chat template), found through
// modelTokenizerMap (a file or a directory) or under autoDiscoveryDir
// (default /mnt/models) in a directory named as the model. Loaded files
// are kept for the life of the process.
type DefaultTokenizers struct{}

// Defaults of tokenizersPoolConfig.local.
const (
	DefaultAutoDiscoveryDir = "/mnt/models"
	DefaultTokenizerFile    = "tokenizer.json"
	tokenizerConfigFile     = "tokenizer_config.json"
)

// Tokenizer implements Tokenizers.
func (DefaultTokenizers) Tokenizer(cfg TokenizersPoolConfig) (tokenizer.Tokenizer, tokenizer.ChatTemplate, error) {
	if cfg.ModelName == BuiltinModel {
		return tokenizer.Builtin{}, tokenizer.Llama3Template{}, nil
	}
	path := tokenizerPath(cfg)
	if _, err := os.Stat(path); err != nil {
		return nil, nil, fmt.Errorf("no tokenizer for model %q at %s (set local.modelTokenizerMap or local.autoDiscoveryDir; %q selects the simulator's): %w", cfg.ModelName, path, BuiltinModel, err)
	}
	return loadFiles(path)
}

// tokenizerPath is where the model's tokenizer.json should be.
func tokenizerPath(cfg TokenizersPoolConfig) string {
	dir, file := DefaultAutoDiscoveryDir, DefaultTokenizerFile
	name := cfg.ModelName
	if l := cfg.Local; l != nil {
		if l.Tokenizer != "" {
			name = l.Tokenizer
		}
		if p, ok := l.ModelTokenizerMap[cfg.ModelName]; ok {
			if st, err := os.Stat(p); err == nil && st.IsDir() {
				return filepath.Join(p, file)
			}
			return p
		}
		if l.AutoDiscoveryDir != "" {
			dir = l.AutoDiscoveryDir
		}
		if l.AutoDiscoveryTokenizerFileName != "" {
			file = l.AutoDiscoveryTokenizerFileName
		}
	}
	return filepath.Join(dir, filepath.FromSlash(name), file)
}

type loaded struct {
	tok  tokenizer.Tokenizer
	tmpl tokenizer.ChatTemplate
}

var (
	loadedMu sync.Mutex
	loadedBy = map[string]loaded{}
)

// loadFiles loads (once per process) a tokenizer.json and the chat
// template of the tokenizer_config.json beside it.
func loadFiles(path string) (tokenizer.Tokenizer, tokenizer.ChatTemplate, error) {
	loadedMu.Lock()
	defer loadedMu.Unlock()
	if l, ok := loadedBy[path]; ok {
		return l.tok, l.tmpl, nil
	}
	tok, err := hf.LoadFile(path)
	if err != nil {
		return nil, nil, err
	}
	tmpl, err := chattemplate.LoadFile(filepath.Join(filepath.Dir(path), tokenizerConfigFile))
	if err != nil {
		return nil, nil, fmt.Errorf("the chat template of %s: %w", path, err)
	}
	loadedBy[path] = loaded{tok, tmpl}
	return tok, tmpl, nil
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
