package imagebuild

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// repoRoot is the repository's root, from this module's directory.
const repoRoot = "../.."

// TestImagesReproducible builds one static and one cgo image twice, into
// two directories, checks that both builds give one digest (the OCI
// archives are equal byte for byte too), then checks each image (see
// checkImage). make images-test checks every image make images built.
func TestImagesReproducible(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two images twice (go build of hermod-loadgen and vllm-sim); skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	src := testSource(ctx, t, root)
	bins, err := Select([]string{"hermod-loadgen", "vllm-sim"})
	if err != nil {
		t.Fatal(err)
	}
	var runs [2][]Result
	for i := range runs {
		runs[i], err = Build(ctx, Options{
			Root: root, OutDir: filepath.Join(t.TempDir(), fmt.Sprint("images", i)), GoTool: goTool(),
			CABundle: "/etc/ssl/certs/ca-certificates.crt", Registry: DefaultRegistry,
			Binaries: bins, Source: src, Log: testWriter{t},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for i, r := range runs[0] {
		again := runs[1][i]
		t.Logf("%s: %s and %s (%d bytes compressed)", r.Ref, r.Digest, again.Digest, r.Size)
		if r.Digest != again.Digest {
			t.Errorf("%s: two builds gave %s and %s", r.Ref, r.Digest, again.Digest)
		}
		if a, b := readFile(t, r.Archive), readFile(t, again.Archive); string(a) != string(b) {
			t.Errorf("%s: the two OCI archives differ", r.Ref)
		}
		img, ref, err := ReadLayout(r.Layout)
		if err != nil {
			t.Fatal(err)
		}
		if ref != r.Ref {
			t.Errorf("layout %s names %q, want %q", r.Layout, ref, r.Ref)
		}
		checkImage(ctx, t, img, r.Binary, src)
		if !r.Binary.Cgo {
			podmanRun(ctx, t, r.Archive, r.Ref, versionLine(r.Binary, src))
		}
	}
}

// TestBuiltImages checks every image make images wrote to the directory
// $HERMOD_IMAGES_DIR (make images-test sets it).
func TestBuiltImages(t *testing.T) {
	dir := os.Getenv("HERMOD_IMAGES_DIR")
	if dir == "" {
		t.Skip("HERMOD_IMAGES_DIR is not set: make images-test checks what make images built")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	src := testSource(ctx, t, root)
	for _, b := range Catalog {
		t.Run(b.Name, func(t *testing.T) {
			if _, err := os.Stat(filepath.Join(dir, b.Name)); errors.Is(err, os.ErrNotExist) {
				t.Skipf("not built (make images IMAGES=...)")
			}
			img, ref, err := ReadLayout(filepath.Join(dir, b.Name))
			if err != nil {
				t.Fatal(err)
			}
			if want := Ref(DefaultRegistry, b, src.Version); ref != want {
				t.Errorf("named %q, want %q", ref, want)
			}
			checkImage(ctx, t, img, b, src)
			podmanRun(ctx, t, filepath.Join(dir, b.Name+".tar"), ref, versionLine(b, src))
		})
	}
}

// testSource is what make images would stamp on this tree.
func testSource(ctx context.Context, t *testing.T, root string) Source {
	t.Helper()
	version, err := ChartAppVersion(filepath.Join(root, "deployments/helm/hermod/Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if v := os.Getenv("HERMOD_IMAGES_VERSION"); v != "" {
		version = v
	}
	src := Source{Version: version, URL: DefaultSourceURL}
	if src.Commit, src.Time, src.Modified, err = ReadGit(ctx, root); err != nil {
		t.Fatal(err)
	}
	return src
}

// checkImage checks img's config (non-root user, the binary as the
// entrypoint, the labels, the commit's time), then unpacks its root file
// system and runs the binary's --version from it: directly for a static
// binary; through the image's own dynamic loader with --library-path for
// a cgo one, after checking that the loader resolves every library inside
// the image. As root it also runs the binary chrooted into the unpacked
// image as the nonroot user, which is how a container runtime runs it.
func checkImage(ctx context.Context, t *testing.T, img v1.Image, b Binary, src Source) {
	t.Helper()
	checkConfig(t, img, b, src)
	rootfs := t.TempDir()
	if err := unpack(img, rootfs); err != nil {
		t.Fatal(err)
	}
	if passwd := string(readFile(t, filepath.Join(rootfs, "etc/passwd"))); !strings.Contains(passwd, "nonroot:x:65532:65532:") {
		t.Errorf("%s: /etc/passwd has no nonroot user: %q", b.Name, passwd)
	}
	want := versionLine(b, src)
	entry := filepath.Join(BinDir, b.Name)
	args := []string{filepath.Join(rootfs, entry), "--version"}
	if b.Cgo {
		loader, libs := loaderOf(t, rootfs, args[0])
		checkResolvedInside(ctx, t, rootfs, loader, libs, args[0])
		args = append([]string{loader, "--library-path", libs}, args...)
	}
	if out := runVersion(ctx, t, nil, args...); !strings.HasPrefix(out, want) {
		t.Errorf("%s --version: %q, want %q...", b.Name, out, want)
	}
	if os.Geteuid() != 0 {
		t.Logf("%s: not root: the chrooted run is skipped", b.Name)
		return
	}
	attr := &syscall.SysProcAttr{Chroot: rootfs, Credential: &syscall.Credential{Uid: NonRoot, Gid: NonRoot}}
	if out := runVersion(ctx, t, attr, entry, "--version"); !strings.HasPrefix(out, want) {
		t.Errorf("%s --version chrooted: %q, want %q...", b.Name, out, want)
	}
}

// versionLine is how b's --version begins when built from src.
func versionLine(b Binary, src Source) string {
	return fmt.Sprintf("%s %s (commit %s", b.Name, src.Version, src.Commit[:12])
}

// checkConfig checks img's config: the non-root user, the binary as the
// entrypoint, the labels, the commit's time.
func checkConfig(t *testing.T, img v1.Image, b Binary, src Source) {
	t.Helper()
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	entry := filepath.Join(BinDir, b.Name)
	if cfg.Config.User != "65532:65532" || !slices.Equal(cfg.Config.Entrypoint, []string{entry}) {
		t.Errorf("%s: user %q, entrypoint %q", b.Name, cfg.Config.User, cfg.Config.Entrypoint)
	}
	for k, want := range Labels(b, src) {
		if got := cfg.Config.Labels[k]; got != want {
			t.Errorf("%s: label %s = %q, want %q", b.Name, k, got, want)
		}
	}
	if !cfg.Created.Equal(src.Time) || cfg.OS != "linux" {
		t.Errorf("%s: created %v, os %q; want %v, linux", b.Name, cfg.Created, cfg.OS, src.Time)
	}
}

// loaderOf returns the image's dynamic loader (the binary's ELF
// interpreter, under rootfs) and the image's library directories, as a
// --library-path.
func loaderOf(t *testing.T, rootfs, binary string) (loader, libraryPath string) {
	t.Helper()
	interp, err := interpreter(binary)
	if err != nil || interp == "" {
		t.Fatalf("%s: no ELF interpreter (%v): not a dynamic binary", binary, err)
	}
	libs, err := filepath.Glob(filepath.Join(rootfs, "*", "*", "*.so*"))
	if err != nil {
		t.Fatal(err)
	}
	more, _ := filepath.Glob(filepath.Join(rootfs, "*", "*.so*"))
	var dirs []string
	for _, l := range append(libs, more...) {
		if d := filepath.Dir(l); !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	return filepath.Join(rootfs, interp), strings.Join(dirs, ":")
}

// checkResolvedInside fails unless the image's loader finds every library
// binary needs inside rootfs (with --library-path alone a missing one
// would come from the host).
func checkResolvedInside(ctx context.Context, t *testing.T, rootfs, loader, libs, binary string) {
	t.Helper()
	out := runVersion(ctx, t, nil, loader, "--library-path", libs, "--list", binary)
	for line := range strings.Lines(out) {
		_, target, ok := strings.Cut(line, "=>")
		if ok && !strings.HasPrefix(strings.TrimSpace(target), rootfs+"/") {
			t.Errorf("%s: %s is not resolved inside the image", filepath.Base(binary), strings.TrimSpace(line))
		}
	}
}

func runVersion(ctx context.Context, t *testing.T, attr *syscall.SysProcAttr, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.SysProcAttr = attr
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=" + BinDir}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("%s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// unpack writes img's flattened root file system (mutate.Extract) under
// dir: directories and regular files only, as the images hold.
func unpack(img v1.Image, dir string) error {
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("unpack: %w", err)
		}
		p := filepath.Join(dir, filepath.Clean("/"+h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(p, 0o755)
		case tar.TypeReg:
			err = writeFile(p, tr, os.FileMode(h.Mode).Perm())
		default:
			err = fmt.Errorf("%s: unexpected type %q", h.Name, h.Typeflag)
		}
		if err != nil {
			return fmt.Errorf("unpack: %w", err)
		}
	}
}

func writeFile(path string, r io.Reader, mode os.FileMode) (err error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, mode)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	_, err = io.Copy(f, r)
	return err
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func goTool() string {
	if g := os.Getenv("GO"); g != "" {
		return g
	}
	return "go"
}

// testWriter sends go build's output to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
