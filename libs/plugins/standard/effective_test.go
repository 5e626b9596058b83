package standard_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermod/hermod/libs/scheduling"
)

// The effective configuration hermodctl config validate prints, in the
// v0.9+ layout, loads as it is into the same scheduler: written again it
// is the same document, and converting a file (the document as written,
// moved to the new layout) loads into the same effective configuration.
func TestEffectiveConfigLoadsAgain(t *testing.T) {
	var files []string
	for _, pattern := range []string{"testdata/upstream/*.yaml", "testdata/reference/*.yaml", "testdata/llmd-v010/*.yaml"} {
		m, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) < 20 {
		t.Fatalf("only %d corpus files", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			s, err := load(t, f)
			if err != nil {
				t.Skipf("does not load (the corpus tests say whether it should): %v", err)
			}
			first := s.Describe().Effective
			_ = s.Close()
			doc, err := scheduling.MarshalConfig(first)
			if err != nil {
				t.Fatal(err)
			}
			again := loadBytes(t, doc)
			doc2, err := scheduling.MarshalConfig(again)
			if err != nil {
				t.Fatal(err)
			}
			if string(doc) != string(doc2) {
				t.Fatalf("the effective config changes when loaded again:\n--- first\n%s\n--- again\n%s", doc, doc2)
			}
			if !strings.HasPrefix(string(doc), "apiVersion: llm-d.ai/v1alpha1\nkind: EndpointPickerConfig\n") {
				t.Errorf("not the new layout:\n%s", doc)
			}
			// convert: the file as written, in the new layout
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := scheduling.ParseConfig(raw)
			if err != nil {
				t.Fatal(err)
			}
			converted, err := scheduling.MarshalConfig(cfg)
			if err != nil {
				t.Fatal(err)
			}
			for _, old := range []string{"\nparser:", "\nsaturationDetector:", "inference.networking.x-k8s.io", "\ndata:"} {
				if strings.Contains(string(converted), old) {
					t.Errorf("converted config still has %q:\n%s", old, converted)
				}
			}
			doc3, err := scheduling.MarshalConfig(loadBytes(t, converted))
			if err != nil {
				t.Fatal(err)
			}
			if string(doc3) != string(doc) {
				t.Errorf("the converted config runs differently:\n--- effective\n%s\n--- converted, effective\n%s", doc, doc3)
			}
		})
	}
}

// loadBytes builds a config as hermodctl validates it and returns its
// effective configuration.
func loadBytes(t *testing.T, data []byte) *scheduling.Config {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := load(t, path)
	if err != nil {
		t.Fatalf("does not load: %v\n%s", err, data)
	}
	defer func() { _ = s.Close() }()
	return s.Describe().Effective
}
