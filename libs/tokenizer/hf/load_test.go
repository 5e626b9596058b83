package hf

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestLoadErrors(t *testing.T) {
	set := func(path string, v any) func(map[string]any) {
		return func(doc map[string]any) {
			keys := strings.Split(path, ".")
			m := doc
			for _, k := range keys[:len(keys)-1] {
				m = m[k].(map[string]any)
			}
			m[keys[len(keys)-1]] = v
		}
	}
	preSeq := func(steps ...any) func(map[string]any) {
		return set("pre_tokenizer", map[string]any{"type": "Sequence", "pretokenizers": steps})
	}
	split := func(pattern map[string]any) map[string]any {
		return map[string]any{"type": "Split", "pattern": pattern, "behavior": "Isolated", "invert": false}
	}
	byteLevel := map[string]any{"type": "ByteLevel", "add_prefix_space": false, "use_regex": false}
	cases := []struct {
		name        string
		edit        func(map[string]any)
		field       string // the FieldError's field
		msg         string // in the message
		unsupported bool
	}{
		{"model type", set("model.type", "WordPiece"), "model.type", `"WordPiece" is not supported`, true},
		{"no model", set("model", nil), "model", "missing", false},
		{"model not object", set("model", 5), "model", "JSON number where an object was expected", false},
		{"dropout", set("model.dropout", 0.1), "model.dropout", "not supported", true},
		{"subword prefix", set("model.continuing_subword_prefix", "##"), "model.continuing_subword_prefix", "not supported", true},
		{"suffix", set("model.end_of_word_suffix", "</w>"), "model.end_of_word_suffix", "not supported", true},
		{"vocab type", set("model.vocab", []int{1}), "model.vocab", "JSON array where an object was expected", false},
		{"vocab id type", set("model.vocab", map[string]any{"a": "x"}), "model.vocab", "JSON string", false},
		{"negative id", set("model.vocab", map[string]any{"a": -1}), "model.vocab", "outside", false},
		{"empty vocab", set("model.vocab", map[string]any{}), "model.vocab", "missing or empty", false},
		{"missing byte", func(doc map[string]any) {
			delete(doc["model"].(map[string]any)["vocab"].(map[string]int), "Ā")
		}, "model.vocab", "no token for byte 0x00", false},
		{"merge not in vocab", set("model.merges", []string{"t h", "x yz"}), "model.merges[1]", `token "yz" is not in model.vocab`, false},
		{"merge without space", set("model.merges", []string{"th"}), "model.merges[0]", "not two tokens", false},
		{"merge triple", set("model.merges", [][]string{{"t", "h", "e"}}), "model.merges[0]", "2 tokens, not 3", false},
		{"merges type", set("model.merges", 7), "model.merges", "want an array", false},
		{"normalizer", set("normalizer", map[string]any{"type": "Lowercase"}), "normalizer.type", `"Lowercase" is not supported`, true},
		{"normalizer in sequence", set("normalizer", map[string]any{"type": "Sequence", "normalizers": []any{map[string]any{"type": "NFC"}, map[string]any{"type": "Strip"}}}), "normalizer.normalizers[1].type", "not supported", true},
		{"unknown regex", preSeq(split(map[string]any{"Regex": `\s+|\w+`}), byteLevel), "pre_tokenizer.pretokenizers[0].pattern.Regex", "not supported", true},
		{"behavior", preSeq(map[string]any{"type": "Split", "pattern": map[string]any{"Regex": patternCL100K}, "behavior": "Removed"}, byteLevel), "pre_tokenizer.pretokenizers[0].behavior", `"Removed" with a Regex pattern is not supported`, true},
		{"unknown behavior", preSeq(map[string]any{"type": "Split", "pattern": map[string]any{"String": " "}, "behavior": "Sideways"}, byteLevel), "pre_tokenizer.pretokenizers[0].behavior", `"Sideways" is not supported`, true},
		{"empty string pattern", preSeq(split(map[string]any{"String": ""}), byteLevel), "pre_tokenizer.pretokenizers[0].pattern.String", "empty", false},
		{"invert", preSeq(map[string]any{"type": "Split", "pattern": map[string]any{"String": " "}, "behavior": "Isolated", "invert": true}, byteLevel), "pre_tokenizer.pretokenizers[0].invert", "not supported", true},
		{"metaspace after byte level", preSeq(byteLevel, map[string]any{"type": "Metaspace"}), "pre_tokenizer.pretokenizers[1]", "ByteLevel must come last", true},
		{"byte level after metaspace", preSeq(map[string]any{"type": "Metaspace"}, byteLevel), "pre_tokenizer.pretokenizers[1]", "ByteLevel after Metaspace", true},
		{"metaspace scheme", set("pre_tokenizer", map[string]any{"type": "Metaspace", "prepend_scheme": "sometimes"}), "pre_tokenizer.prepend_scheme", `"sometimes" is not supported`, true},
		{"metaspace replacement", set("pre_tokenizer", map[string]any{"type": "Metaspace", "replacement": "ab"}), "pre_tokenizer.replacement", "not one character", false},
		{"metaspace contradiction", set("pre_tokenizer", map[string]any{"type": "Metaspace", "prepend_scheme": "first", "add_prefix_space": false}), "pre_tokenizer.add_prefix_space", "contradicts", false},
		{"whitespace pre-tokenizer", set("pre_tokenizer", map[string]any{"type": "Whitespace"}), "pre_tokenizer.type", `"Whitespace" is not supported`, true},
		{"unk token not in vocab", func(doc map[string]any) {
			set("model.unk_token", "<nope>")(doc)
			doc["pre_tokenizer"] = nil // not byte-level: unk_token is used
		}, "model.unk_token", "not in model.vocab", false},
		{"replace regex", set("normalizer", map[string]any{"type": "Replace", "pattern": map[string]any{"Regex": " {2,}"}, "content": " "}), "normalizer.pattern.Regex", "not supported", true},
		{"replace without content", set("normalizer", map[string]any{"type": "Replace", "pattern": map[string]any{"String": "a"}}), "normalizer.content", "missing", false},
		{"replace empty", set("normalizer", map[string]any{"type": "Replace", "pattern": map[string]any{"String": ""}, "content": "x"}), "normalizer.pattern.String", "empty", false},
		{"prepend without string", set("normalizer", map[string]any{"type": "Prepend"}), "normalizer.prepend", "missing", false},
		{"precompiled", set("normalizer", map[string]any{"type": "Precompiled", "precompiled_charsmap": "AA=="}), "normalizer.type", `"Precompiled" is not supported`, true},
		{"after byte level", preSeq(byteLevel, split(map[string]any{"Regex": patternCL100K})), "pre_tokenizer.pretokenizers[1]", "ByteLevel must come last", true},
		{"added token without id", set("added_tokens", []any{map[string]any{"content": "<x>"}}), "added_tokens[0].id", "missing", false},
		{"added token empty", set("added_tokens", []any{map[string]any{"id": 300, "content": ""}}), "added_tokens[0].content", "missing or empty", false},
		{"added tokens type", set("added_tokens", "x"), "added_tokens", "JSON string where an array was expected", false},
		{"post processor", set("post_processor", map[string]any{"type": "Whatever"}), "post_processor.type", "not supported", true},
		{"template without A", set("post_processor.single", []any{}), "post_processor.single", "no Sequence A", false},
		{"template B", set("post_processor.single", []any{map[string]any{"Sequence": map[string]any{"id": "B"}}}), "post_processor.single[0]", "not supported", true},
		{"template unknown token", set("post_processor.special_tokens", map[string]any{}), "post_processor.special_tokens", `no entry for "<|bos|>"`, false},
		{"template id out of vocab", set("post_processor.special_tokens", map[string]any{"<|bos|>": map[string]any{"ids": []int{99999}}}), "post_processor", "not in the vocabulary", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			doc := tinyDoc()
			c.edit(doc)
			_, err := Load(marshalDoc(t, doc))
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("err = %v, want a FieldError", err)
			}
			if fe.Field != c.field || !strings.Contains(err.Error(), c.msg) {
				t.Errorf("err = %q, want field %s and %q", err, c.field, c.msg)
			}
			if errors.Is(err, ErrUnsupported) != c.unsupported {
				t.Errorf("errors.Is(%q, ErrUnsupported) = %v", err, !c.unsupported)
			}
		})
	}
}

func TestLoadNotJSON(t *testing.T) {
	for _, data := range []string{"", "{", "[1, 2]", `{"model": }`} {
		if _, err := Load([]byte(data)); err == nil {
			t.Errorf("Load(%q) succeeded", data)
		}
	}
	_, err := Load([]byte(`[1]`))
	if err == nil || !strings.Contains(err.Error(), "JSON array where an object was expected") {
		t.Errorf("Load([1]) = %v", err)
	}
}

func TestLoadFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokenizer.json")
	if err := os.WriteFile(path, marshalDoc(t, tinyDoc()), 0o600); err != nil {
		t.Fatal(err)
	}
	tok, err := LoadFile(path, WithName("tiny"))
	if err != nil {
		t.Fatal(err)
	}
	if tok.Name() != "tiny" {
		t.Errorf("Name() = %q", tok.Name())
	}
	if _, err := LoadFile(filepath.Join(t.TempDir(), "missing.json")); err == nil {
		t.Error("LoadFile of a missing file succeeded")
	}
	bad := tinyDoc()
	bad["model"].(map[string]any)["type"] = "WordPiece"
	if err := os.WriteFile(path, marshalDoc(t, bad), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadFile(path); err == nil || !strings.Contains(err.Error(), path+`: model.type: "WordPiece" is not supported`) {
		t.Errorf("err = %v", err)
	}
}

// The default name is a digest of the file: the same file has the same
// name, another file another.
func TestDefaultName(t *testing.T) {
	a, b := tiny(t, nil), tiny(t, nil)
	c := tiny(t, func(doc map[string]any) { doc["normalizer"] = map[string]any{"type": "NFC"} })
	if a.Name() != b.Name() || a.Name() == c.Name() || !strings.HasPrefix(a.Name(), "hf-bpe-") {
		t.Errorf("names %q %q %q", a.Name(), b.Name(), c.Name())
	}
}

// Both forms of merges load to the same model.
func TestMergeForms(t *testing.T) {
	pairs := tiny(t, nil)
	strs := tiny(t, func(doc map[string]any) {
		m := doc["model"].(map[string]any)
		var joined []string
		for _, p := range m["merges"].([][2]string) {
			joined = append(joined, p[0]+" "+p[1])
		}
		m["merges"] = joined
	})
	text := "the thing and the other  \n\n aaaa"
	if a, b := pairs.Encode(nil, text), strs.Encode(nil, text); !slices.Equal(a, b) {
		t.Errorf("array merges %v, string merges %v", a, b)
	}
}

func TestPostProcessors(t *testing.T) {
	base := tiny(t, nil)
	bos := func(tok *Tokenizer) uint32 { return tinyID(t, tok, "<|bos|>") }
	eos := func(tok *Tokenizer) uint32 { return tinyID(t, tok, "<|eos|>") }
	template := func(doc map[string]any) map[string]any { return doc["post_processor"].(map[string]any) }
	cases := []struct {
		name string
		edit func(doc map[string]any)
		want func(tok *Tokenizer) (prefix, suffix []uint32)
	}{
		{"none", func(doc map[string]any) { doc["post_processor"] = nil }, func(*Tokenizer) ([]uint32, []uint32) { return nil, nil }},
		{"byte level", func(doc map[string]any) { doc["post_processor"] = map[string]any{"type": "ByteLevel"} },
			func(*Tokenizer) ([]uint32, []uint32) { return nil, nil }},
		{"template", nil, func(tok *Tokenizer) ([]uint32, []uint32) { return []uint32{bos(tok)}, nil }},
		{"sequence", func(doc map[string]any) {
			doc["post_processor"] = map[string]any{"type": "Sequence", "processors": []any{map[string]any{"type": "ByteLevel"}, template(doc)}}
		}, func(tok *Tokenizer) ([]uint32, []uint32) { return []uint32{bos(tok)}, nil }},
		{"roberta", func(doc map[string]any) {
			doc["post_processor"] = map[string]any{"type": "RobertaProcessing", "cls": []any{"<|bos|>", bos(base)}, "sep": []any{"<|eos|>", eos(base)}}
		}, func(tok *Tokenizer) ([]uint32, []uint32) { return []uint32{bos(tok)}, []uint32{eos(tok)} }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tok := tiny(t, c.edit)
			prefix, suffix := c.want(tok)
			body := tok.EncodeWithSpecial(nil, "the end", false)
			want := slices.Concat(prefix, body, suffix)
			if got := tok.EncodeWithSpecial(nil, "the end", true); !slices.Equal(got, want) {
				t.Errorf("with special tokens %v, want %v", got, want)
			}
			if got := tok.EncodeWithSpecial(nil, "", true); !slices.Equal(got, slices.Concat(prefix, suffix)) {
				t.Errorf("empty text: %v", got)
			}
		})
	}
}

func TestAddSpecialTokensOption(t *testing.T) {
	on, off := tiny(t, nil), tiny(t, nil, AddSpecialTokens(false))
	bos := tinyID(t, on, "<|bos|>")
	if got := on.Encode(nil, "the"); len(got) != 2 || got[0] != bos {
		t.Errorf("default Encode = %v, want <|bos|> first", got)
	}
	if got := off.Encode(nil, "the"); len(got) != 1 || got[0] == bos {
		t.Errorf("AddSpecialTokens(false) Encode = %v", got)
	}
	// dst is appended to.
	if got := off.Encode([]uint32{7}, "the"); len(got) != 2 || got[0] != 7 {
		t.Errorf("Encode(dst) = %v", got)
	}
}

func TestUnknownFieldsIgnored(t *testing.T) {
	doc := tinyDoc()
	doc["something_new"] = map[string]any{"x": 1}
	doc["model"].(map[string]any)["future_option"] = true
	doc["truncation"] = map[string]any{"max_length": 3}
	tok, err := Load(marshalDoc(t, doc))
	if err != nil {
		t.Fatal(err)
	}
	// truncation is ignored, as transformers and vLLM do.
	if got := tok.EncodeWithSpecial(nil, "the the the the the", false); len(got) != 5 {
		t.Errorf("ids %v: truncated?", got)
	}
}
