package hf

import (
	"encoding/json"
	"os"
	"slices"
	"sort"
	"sync"
	"testing"

	"github.com/hermod/hermod/libs/tokenizer/hf/internal/npmtokenizers"
)

// referenceFile is testdata/reference_ids.json (written by testdata/gen):
// for each tokenizer and each text of testdata/corpus.json, the ids of the
// package's own JavaScript tokenizer (transformers.js) and of the Hugging
// Face Rust library (what vLLM uses), with and without special tokens.
type referenceFile struct {
	Packages    map[string]string             `json:"packages"`
	CorpusSize  int                           `json:"corpus_size"`
	Tokenizers  map[string]referenceTokenizer `json:"tokenizers"`
	AddedTokens struct {
		JS   [][]uint32 `json:"js"`
		Rust [][]uint32 `json:"rust"`
	} `json:"added_tokens"`
}

type referenceTokenizer struct {
	Package string `json:"package"`
	// PostProcessor, if set, replaces the packaged file's post_processor.
	PostProcessor json.RawMessage `json:"post_processor"`
	JS            referenceIDs    `json:"js"`
	Rust          referenceIDs    `json:"rust"`
}

type referenceIDs struct {
	WithSpecial    [][]uint32 `json:"with_special"`
	WithoutSpecial [][]uint32 `json:"without_special"`
}

func readJSON(tb testing.TB, path string, v any) {
	tb.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		tb.Fatalf("%s: %v", path, err)
	}
}

func readCorpus(tb testing.TB) []string {
	var corpus []string
	readJSON(tb, "testdata/corpus.json", &corpus)
	return corpus
}

var (
	tokenizerMu   sync.Mutex
	tokenizerMemo = map[string]*Tokenizer{}
)

// loadReal loads pkg's tokenizer.json, with its post_processor replaced by
// postProcessor if that is set.
func loadReal(tb testing.TB, pkg npmtokenizers.Package, postProcessor json.RawMessage, opts ...Option) *Tokenizer {
	tb.Helper()
	files := packageFiles(tb, pkg)
	key := pkg.Name + string(postProcessor)
	tokenizerMu.Lock()
	defer tokenizerMu.Unlock()
	if t, ok := tokenizerMemo[key]; ok && len(opts) == 0 {
		return t
	}
	data := files.TokenizerJSON
	if postProcessor != nil {
		var doc map[string]json.RawMessage
		if err := json.Unmarshal(data, &doc); err != nil {
			tb.Fatal(err)
		}
		doc["post_processor"] = postProcessor
		var err error
		if data, err = json.Marshal(doc); err != nil {
			tb.Fatal(err)
		}
	}
	t, err := Load(data, opts...)
	if err != nil {
		tb.Fatalf("load %s: %v", pkg.Name, err)
	}
	if len(opts) == 0 {
		tokenizerMemo[key] = t
	}
	return t
}

// TestReferenceIDs compares the ids of every corpus text, with and
// without special tokens, with those of the packages' own tokenizer and
// of the Rust library. Where those two disagree (they do on no text of
// the corpus today), the Rust library, vLLM's, is the one to match.
func TestReferenceIDs(t *testing.T) {
	corpus := readCorpus(t)
	var ref referenceFile
	readJSON(t, "testdata/reference_ids.json", &ref)
	if ref.CorpusSize != len(corpus) {
		t.Fatalf("reference_ids.json is for %d texts, corpus.json has %d: regenerate it (testdata/gen/README.md)", ref.CorpusSize, len(corpus))
	}
	names := make([]string, 0, len(ref.Tokenizers))
	for name := range ref.Tokenizers {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		rt := ref.Tokenizers[name]
		t.Run(name, func(t *testing.T) {
			pkg, ok := npmtokenizers.ByName(rt.Package)
			if !ok {
				t.Fatalf("reference for unknown package %s", rt.Package)
			}
			if v := ref.Packages[pkg.Name]; v != pkg.Version {
				t.Fatalf("reference ids are from %s@%s, the test pins %s", pkg.Name, v, pkg.Version)
			}
			tok := loadReal(t, pkg, rt.PostProcessor)
			for _, mode := range []struct {
				name       string
				addSpecial bool
				js, rust   [][]uint32
			}{
				{"with_special", true, rt.JS.WithSpecial, rt.Rust.WithSpecial},
				{"without_special", false, rt.JS.WithoutSpecial, rt.Rust.WithoutSpecial},
			} {
				if len(mode.js) != len(corpus) || len(mode.rust) != len(corpus) {
					t.Fatalf("%s: reference has %d/%d id lists for %d texts", mode.name, len(mode.js), len(mode.rust), len(corpus))
				}
				matched, jsDiffers := 0, 0
				for i, text := range corpus {
					want := mode.rust[i]
					if !slices.Equal(mode.js[i], want) {
						jsDiffers++
						t.Logf("%s %q: the JS tokenizer gives %v, the Rust library %v; matching the latter", mode.name, text, mode.js[i], want)
					}
					got := tok.EncodeWithSpecial(nil, text, mode.addSpecial)
					if slices.Equal(got, want) {
						matched++
						continue
					}
					t.Errorf("%s %q:\n got  %v\n want %v", mode.name, text, got, want)
				}
				t.Logf("%s: %d/%d texts match (JS and Rust references differ on %d)", mode.name, matched, len(corpus), jsDiffers)
			}
			// The interface method adds special tokens by default.
			for i, text := range corpus {
				if got := tok.Encode(nil, text); !slices.Equal(got, rt.Rust.WithSpecial[i]) {
					t.Fatalf("Encode(%q) = %v, want the with_special ids %v", text, got, rt.Rust.WithSpecial[i])
				}
			}
		})
	}
}

func TestRealVocabSize(t *testing.T) {
	for _, c := range []struct {
		pkg  npmtokenizers.Package
		want int
	}{{npmtokenizers.Llama3, 128256}, {npmtokenizers.Qwen3, 151669}} {
		t.Run(c.pkg.Name, func(t *testing.T) {
			tok := loadReal(t, c.pkg, nil)
			if got := tok.VocabSize(); got != c.want {
				t.Errorf("VocabSize() = %d, want %d", got, c.want)
			}
			ids := tok.Encode(nil, "Hello, world! <|im_start|> <|begin_of_text|>")
			for _, id := range ids {
				if int(id) >= tok.VocabSize() {
					t.Errorf("id %d >= VocabSize", id)
				}
			}
			if s, err := tok.Decode(ids); err != nil || s != "Hello, world! <|im_start|> <|begin_of_text|>" {
				t.Errorf("Decode = %q, %v", s, err)
			}
		})
	}
}

// TestAddedTokensReference compares added-token handling (lstrip, rstrip,
// single_word, normalized, leftmost-longest matching, id assignment) with
// the Rust library on a synthetic tokenizer. It needs no network. The
// JavaScript tokenizer implements little of this and is not compared.
func TestAddedTokensReference(t *testing.T) {
	var ref referenceFile
	readJSON(t, "testdata/reference_ids.json", &ref)
	var texts []string
	readJSON(t, "testdata/added/texts.json", &texts)
	if len(ref.AddedTokens.Rust) != len(texts) {
		t.Fatalf("reference has %d id lists for %d texts: regenerate it (testdata/gen/README.md)", len(ref.AddedTokens.Rust), len(texts))
	}
	data, err := os.ReadFile("testdata/added/tokenizer.json")
	if err != nil {
		t.Fatal(err)
	}
	tok, err := Load(data)
	if err != nil {
		t.Fatal(err)
	}
	for i, text := range texts {
		if got, want := tok.EncodeWithSpecial(nil, text, false), ref.AddedTokens.Rust[i]; !slices.Equal(got, want) {
			t.Errorf("%q:\n got  %v\n want %v", text, got, want)
		}
	}
}
