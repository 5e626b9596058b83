package hf

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
)

// LoadFile loads a tokenizer.json file; see Load.
func LoadFile(path string, opts ...Option) (*Tokenizer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load tokenizer: %w", err)
	}
	t, err := Load(data, opts...)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", path, err)
	}
	return t, nil
}

// Load parses the contents of a tokenizer.json. It supports BPE models on
// GPT-2's byte-level alphabet (Llama 3, Qwen, DeepSeek V3, gpt-oss),
// SentencePiece-style BPE on characters with byte_fallback (Llama 2,
// Gemma) and Unigram models; errors name the offending JSON field, and
// wrap ErrUnsupported for features it does not implement.
func Load(data []byte, opts ...Option) (*Tokenizer, error) {
	o := defaultOptions()
	for _, opt := range opts {
		opt(&o)
	}
	var f fileJSON
	if err := json.Unmarshal(data, &f); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return nil, decodeField("", data, &f)
		}
		return nil, fmt.Errorf("parse tokenizer.json: %w", err)
	}
	t := &Tokenizer{name: o.name, addSpecial: o.addSpecialTokens, vocab: vocabulary{tokens: make(map[uint32]string)}}
	if t.name == "" {
		sum := sha256.Sum256(data)
		t.name = "hf-bpe-" + hex.EncodeToString(sum[:8])
	}
	var err error
	if t.normalizer, err = loadNormalizer("normalizer", f.Normalizer); err != nil {
		return nil, err
	}
	if t.pre, err = loadPreTokenizer(f.PreTokenizer); err != nil {
		return nil, err
	}
	if t.model, err = loadModel(f.Model, t.pre.byteLevel, &t.vocab); err != nil {
		return nil, err
	}
	if _, isUnigram := t.model.(*unigram); isUnigram && t.pre.byteLevel {
		return nil, fieldErrorf("pre_tokenizer", "ByteLevel with a Unigram model is %w", ErrUnsupported)
	}
	if err := t.loadAddedTokens(f.AddedTokens, o.splitSpecialTokens); err != nil {
		return nil, err
	}
	if t.post, err = loadPostProcessor("post_processor", f.PostProcessor); err != nil {
		return nil, err
	}
	for _, id := range slices.Concat(t.post.prefix, t.post.suffix) {
		if _, ok := t.vocab.tokens[id]; !ok {
			return nil, fieldErrorf("post_processor", "adds id %d, which is not in the vocabulary", id)
		}
	}
	return t, nil
}

// loadAddedTokens builds the added-token matchers.
func (t *Tokenizer) loadAddedTokens(list []addedTokenJSON, splitSpecial bool) error {
	ids := addedIDs{model: t.model, byContent: map[string]uint32{}, max: -1}
	var raw, normalized []addedToken
	for i, a := range list {
		field := fmt.Sprintf("added_tokens[%d]", i)
		switch {
		case a.Content == "":
			return fieldErrorf(field+".content", "missing or empty")
		case a.ID == nil:
			return fieldErrorf(field+".id", "missing")
		case *a.ID < 0 || *a.ID > maxID:
			return fieldErrorf(field+".id", "%d is outside [0, %d]", *a.ID, maxID)
		}
		id := ids.assign(a.Content)
		tok := addedToken{id: id, content: a.Content, special: a.Special, singleWord: a.SingleWord, lstrip: a.LStrip, rstrip: a.RStrip}
		if a.Normalized {
			// Matched after normalization, so written normalized.
			tok.content = t.normalizer.apply(tok.content)
			if tok.content == "" {
				return fieldErrorf(field+".content", "empty once normalized")
			}
			normalized = append(normalized, tok)
		} else {
			raw = append(raw, tok)
		}
		t.vocab.add(id, a.Content)
	}
	t.added = newAddedMatcher(raw, splitSpecial)
	t.addedNorm = newAddedMatcher(normalized, splitSpecial)
	return nil
}

// addedIDs gives added tokens the ids the Hugging Face library gives them
// when it loads a tokenizer.json, which ignores the ids written in the
// file (it only warns when they differ): an added token already seen keeps
// its id; one that is a model token has the model token's id; any other
// gets the number of model tokens, or, once an added token has an id at
// least that, the largest added id plus one. Real files write these very
// ids.
type addedIDs struct {
	model     model
	byContent map[string]uint32
	max       int64 // largest id given, or -1
}

func (a *addedIDs) assign(content string) uint32 {
	id, ok := a.byContent[content]
	if !ok {
		id, ok = a.model.tokenID(content)
	}
	if !ok {
		size := int64(a.model.vocabSize())
		switch {
		case a.max >= 0 && (a.max >= size || size == 0):
			id = uint32(a.max + 1)
		default:
			id = uint32(size)
		}
	}
	a.byContent[content] = id
	a.max = max(a.max, int64(id))
	return id
}
