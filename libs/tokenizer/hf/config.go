package hf

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// The tokenizer.json schema, as far as this package reads it. Components
// that are tagged unions ("type": ...) stay raw until their type is known.
// Unknown fields are ignored, as the Hugging Face library does.
type fileJSON struct {
	AddedTokens   []addedTokenJSON `json:"added_tokens"`
	Normalizer    json.RawMessage  `json:"normalizer"`
	PreTokenizer  json.RawMessage  `json:"pre_tokenizer"`
	PostProcessor json.RawMessage  `json:"post_processor"`
	Model         json.RawMessage  `json:"model"`
	// truncation and padding are ignored: transformers turns them off
	// unless a request asks for them, and so does vLLM.
}

type addedTokenJSON struct {
	ID         *int64 `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

type modelJSON struct {
	Type                    string          `json:"type"`
	Dropout                 *float64        `json:"dropout"`
	UnkToken                *string         `json:"unk_token"` // BPE
	UnkID                   *int64          `json:"unk_id"`    // Unigram
	ContinuingSubwordPrefix *string         `json:"continuing_subword_prefix"`
	EndOfWordSuffix         *string         `json:"end_of_word_suffix"`
	FuseUnk                 bool            `json:"fuse_unk"`
	ByteFallback            bool            `json:"byte_fallback"`
	IgnoreMerges            bool            `json:"ignore_merges"`
	Vocab                   json.RawMessage `json:"vocab"` // BPE: {token: id}; Unigram: [[piece, score], ...]
	Merges                  json.RawMessage `json:"merges"`
}

// typeJSON reads the tag of a tagged union.
type typeJSON struct {
	Type string `json:"type"`
}

// isNull reports whether raw is absent or JSON null.
func isNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}

// decodeField decodes raw, the value of field, into v; a type mismatch is
// reported as a FieldError naming the innermost field.
func decodeField(field string, raw json.RawMessage, v any) error {
	err := json.Unmarshal(raw, v)
	if err == nil {
		return nil
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		switch {
		case field == "":
			field = te.Field
		case te.Field != "":
			field += "." + te.Field
		}
		if field == "" {
			field = "(top level)"
		}
		return fieldErrorf(field, "JSON %s where %s was expected", te.Value, jsonKind(te.Type.Kind().String()))
	}
	return &FieldError{Field: field, Err: err}
}

// jsonKind names a Go kind the way a JSON user would.
func jsonKind(kind string) string {
	switch kind {
	case "struct", "map":
		return "an object"
	case "slice", "array":
		return "an array"
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "ptr", "interface":
		return "a value"
	}
	return fmt.Sprintf("a number that fits %s", kind)
}

// componentType returns the "type" of the tagged union raw, the value of
// field.
func componentType(field string, raw json.RawMessage) (string, error) {
	var t typeJSON
	if err := decodeField(field, raw, &t); err != nil {
		return "", err
	}
	return t.Type, nil
}
