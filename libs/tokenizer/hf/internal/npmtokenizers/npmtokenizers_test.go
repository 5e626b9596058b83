package npmtokenizers

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"os"
	"strings"
	"testing"
)

func tarball(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for name, body := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body))}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestExtract(t *testing.T) {
	tgz := tarball(t, map[string]string{
		"package/models/tokenizer.json":        `{"model": {}}`,
		"package/models/tokenizer_config.json": `{"chat_template": "x"}`,
		"package/readme.md":                    "ignored",
	})
	f, err := extract(tgz)
	if err != nil {
		t.Fatal(err)
	}
	if string(f.TokenizerJSON) != `{"model": {}}` || string(f.ConfigJSON) != `{"chat_template": "x"}` {
		t.Errorf("extracted %q %q", f.TokenizerJSON, f.ConfigJSON)
	}
	if _, err := extract(tarball(t, map[string]string{"package/models/tokenizer.json": "{}"})); err == nil {
		t.Error("a tarball without tokenizer_config.json was accepted")
	}
	if _, err := extract([]byte("not gzip")); err == nil {
		t.Error("a non-gzip tarball was accepted")
	}
}

func TestCheckIntegrity(t *testing.T) {
	data := []byte("package bytes")
	sum := sha512.Sum512(data)
	good := "sha512-" + base64.StdEncoding.EncodeToString(sum[:])
	if err := checkIntegrity(data, good); err != nil {
		t.Error(err)
	}
	if err := checkIntegrity(append(data, '!'), good); err == nil || !strings.Contains(err.Error(), "want") {
		t.Errorf("tampered data: %v", err)
	}
	if err := checkIntegrity(data, "sha1-abc"); err == nil {
		t.Error("a sha1 integrity was accepted")
	}
}

func TestCacheDirOverride(t *testing.T) {
	t.Setenv("HERMOD_TOKENIZER_CACHE", "/some/dir")
	if d, err := CacheDir(); err != nil || d != "/some/dir" {
		t.Errorf("CacheDir() = %q, %v", d, err)
	}
}

func TestByName(t *testing.T) {
	if p, ok := ByName(Qwen3.Name); !ok || p != Qwen3 {
		t.Errorf("ByName(%q) = %v, %v", Qwen3.Name, p, ok)
	}
	if _, ok := ByName("left-pad"); ok {
		t.Error("an unknown package was found")
	}
}

// The extracted files are read back from the cache only while they match
// the pinned digests.
func TestExtractedCache(t *testing.T) {
	dir := t.TempDir()
	f := &Files{TokenizerJSON: []byte(`{"model": {}}`), ConfigJSON: []byte(`{"chat_template": "x"}`)}
	tokSum, cfgSum := sha256.Sum256(f.TokenizerJSON), sha256.Sum256(f.ConfigJSON)
	pkg := Package{Name: "@test/pkg", Version: "1.0.0", TokenizerSHA256: hex.EncodeToString(tokSum[:]), ConfigSHA256: hex.EncodeToString(cfgSum[:])}
	if _, err := readExtracted(dir, pkg); err == nil {
		t.Fatal("read from an empty cache")
	}
	if err := writeExtracted(dir, pkg, f); err != nil {
		t.Fatal(err)
	}
	got, err := readExtracted(dir, pkg)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.TokenizerJSON, f.TokenizerJSON) || !bytes.Equal(got.ConfigJSON, f.ConfigJSON) {
		t.Errorf("read back %q %q", got.TokenizerJSON, got.ConfigJSON)
	}
	if err := os.WriteFile(cachePath(dir, pkg, ".tokenizer_config.json"), []byte(`{"chat_template": "y"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := readExtracted(dir, pkg); err == nil || !strings.Contains(err.Error(), "tokenizer_config.json: sha256") {
		t.Errorf("a changed extracted file: err = %v", err)
	}
	other := pkg
	other.TokenizerSHA256 = pkg.ConfigSHA256
	if err := f.check(other); err == nil {
		t.Error("files matched a wrong pinned digest")
	}
}

// Every pinned package has the digests of its two files.
func TestPinnedDigests(t *testing.T) {
	for _, p := range All {
		for _, d := range []string{p.TokenizerSHA256, p.ConfigSHA256} {
			if b, err := hex.DecodeString(d); err != nil || len(b) != sha256.Size {
				t.Errorf("%s: digest %q is not a hex SHA-256", p.Name, d)
			}
		}
	}
}
