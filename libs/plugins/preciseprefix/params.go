package preciseprefix

import (
	"encoding/json"
	"time"

	"github.com/hermod/hermod/libs/scheduling"
)

// Params are precise-prefix-cache-scorer's parameters, in reference/001's
// shape. The block index itself lives in hermod-indexer: its backend
// (kvBlockIndexConfig) and event subscription (kvEventsConfig) are that
// service's configuration, accepted here so that configs run unchanged.
type Params struct {
	TokenProcessorConfig TokenProcessorConfig `json:"tokenProcessorConfig"`
	IndexerConfig        IndexerConfig        `json:"indexerConfig"`
	KVEventsConfig       json.RawMessage      `json:"kvEventsConfig"`
	SpeculativeIndexing  bool                 `json:"speculativeIndexing"`
	SpeculativeTTL       string               `json:"speculativeTTL"`
}

// TokenProcessorConfig cuts prompts into blocks.
type TokenProcessorConfig struct {
	// BlockSize is the tokens per block; it must match the engines'
	// --block-size and hermod-indexer's --block-size.
	BlockSize int `json:"blockSize"`
	// HashSeed seeds the block keys (hermod-indexer's --key-seed); upstream
	// writes it as a string ("42"), and both forms are accepted.
	HashSeed scheduling.Uint64 `json:"hashSeed"`
}

// IndexerConfig is reference/001's indexer configuration.
type IndexerConfig struct {
	KVBlockIndexConfig   json.RawMessage      `json:"kvBlockIndexConfig"`
	TokenizersPoolConfig TokenizersPoolConfig `json:"tokenizersPoolConfig"`
}

// TokenizersPoolConfig says which tokenizer prompts are tokenized with.
type TokenizersPoolConfig struct {
	// ModelName is the base model whose tokenizer to use; empty: each
	// request's model.
	ModelName    string          `json:"modelName"`
	WorkersCount int             `json:"workersCount"`
	HF           json.RawMessage `json:"hf"`
	Local        *LocalTokenizer `json:"local"`
	UDS          json.RawMessage `json:"uds"`
	// VLLM is a vLLM server whose render API tokenizes the prompts no
	// local tokenizer can.
	VLLM *VLLMConfig `json:"vllm"`
}

// LocalTokenizer finds tokenizer files on local disk.
type LocalTokenizer struct {
	AutoDiscoveryDir               string            `json:"autoDiscoveryDir"`
	AutoDiscoveryTokenizerFileName string            `json:"autoDiscoveryTokenizerFileName"`
	ModelTokenizerMap              map[string]string `json:"modelTokenizerMap"`
	Tokenizer                      string            `json:"tokenizer"`
	TokenizerMode                  string            `json:"tokenizerMode"`
	TokenizerRevision              string            `json:"tokenizerRevision"`
}

// Defaults.
const (
	DefaultBlockSize      = 16
	DefaultSpeculativeTTL = 2 * time.Second
)

func decodeParams(raw json.RawMessage, h scheduling.Handle) (Params, time.Duration, error) {
	p := Params{TokenProcessorConfig: TokenProcessorConfig{BlockSize: DefaultBlockSize}, SpeculativeTTL: DefaultSpeculativeTTL.String()}
	if err := scheduling.DecodeParameters(raw, &p, h); err != nil {
		return p, 0, err
	}
	if p.TokenProcessorConfig.BlockSize < 1 {
		return p, 0, scheduling.ParamErrorf("tokenProcessorConfig.blockSize", "must be positive (got %d)", p.TokenProcessorConfig.BlockSize)
	}
	if p.IndexerConfig.TokenizersPoolConfig.ModelName == "" {
		h.Warn("indexerConfig.tokenizersPoolConfig.modelName is not set: each request's model selects the tokenizer its prompt is tokenized with")
	}
	ttl, err := time.ParseDuration(p.SpeculativeTTL)
	if err != nil || ttl <= 0 {
		return p, 0, scheduling.ParamErrorf("speculativeTTL", "must be a positive Go duration (got %q)", p.SpeculativeTTL)
	}
	if len(p.IndexerConfig.KVBlockIndexConfig) > 0 || len(p.KVEventsConfig) > 0 {
		h.Warn("indexerConfig.kvBlockIndexConfig and kvEventsConfig configure hermod-indexer (its flags), not the picker; ignored here")
	}
	if p.IndexerConfig.TokenizersPoolConfig.WorkersCount < 0 {
		return p, 0, scheduling.ParamErrorf("indexerConfig.tokenizersPoolConfig.workersCount", "must not be negative (got %d)", p.IndexerConfig.TokenizersPoolConfig.WorkersCount)
	}
	return p, ttl, nil
}
