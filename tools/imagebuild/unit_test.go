package imagebuild

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseLdd(t *testing.T) {
	for _, tc := range []struct {
		name, out string
		want      []string
		err       error
	}{
		{"a cgo binary", "\tlinux-vdso.so.1 (0x00007ffd)\n" +
			"\tlibzmq.so.5 => /lib/x86_64-linux-gnu/libzmq.so.5 (0x00007fc9)\n" +
			"\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007fc8)\n" +
			"\t/lib64/ld-linux-x86-64.so.2 (0x00007fc95a382000)\n" +
			"\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007fc8)\n",
			[]string{"/lib/x86_64-linux-gnu/libc.so.6", "/lib/x86_64-linux-gnu/libzmq.so.5", "/lib64/ld-linux-x86-64.so.2"}, nil},
		{"a static binary", "\tnot a dynamic executable\n", nil, nil},
		{"a missing library", "\tlibzmq.so.5 => not found\n", nil, ErrLibraryNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseLdd(tc.out)
			if !errors.Is(err, tc.err) || !slices.Equal(got, tc.want) {
				t.Errorf("parseLdd = %q, %v; want %q, %v", got, err, tc.want, tc.err)
			}
		})
	}
}

func TestWriteTarIsCanonical(t *testing.T) {
	at := time.Date(2025, 11, 26, 10, 0, 0, 0, time.UTC)
	files := []File{
		{Path: "/usr/local/bin/x", Mode: 0o755, Data: []byte("binary")},
		{Path: "/tmp", Mode: fs.ModeDir | fs.ModeSticky | 0o777},
		{Path: "/etc/passwd", Mode: 0o644, Data: []byte("root:x:0:0::/:/sbin/nologin\n")},
	}
	var a, b bytes.Buffer
	if err := WriteTar(&a, files, at); err != nil {
		t.Fatal(err)
	}
	slices.Reverse(files)
	if err := WriteTar(&b, files, at.Add(300*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("the same files in another order (and a sub-second time) gave another tar")
	}
	want := []string{"etc/", "etc/passwd", "tmp/", "usr/", "usr/local/", "usr/local/bin/", "usr/local/bin/x"}
	var got []string
	tr := tar.NewReader(&a)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, h.Name)
		if !h.ModTime.Equal(at) || h.Uname != "" || h.Gname != "" {
			t.Errorf("%s: time %v, owner %q:%q", h.Name, h.ModTime, h.Uname, h.Gname)
		}
		if h.Name == "tmp/" && h.Mode != 0o1777 {
			t.Errorf("tmp/ mode %o, want 1777", h.Mode)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("entries %q, want %q", got, want)
	}
}

func TestWriteTarRejects(t *testing.T) {
	for name, files := range map[string][]File{
		"a relative path":       {{Path: "etc/passwd", Mode: 0o644}},
		"an unclean path":       {{Path: "/etc/../passwd", Mode: 0o644}},
		"a path twice":          {{Path: "/a", Mode: 0o644}, {Path: "/a", Mode: 0o644}},
		"a file as a directory": {{Path: "/a", Mode: 0o644}, {Path: "/a/b", Mode: 0o644}},
	} {
		if err := WriteTar(io.Discard, files, time.Unix(0, 0)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestChartAppVersion(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ text, want string }{
		{"apiVersion: v2\nversion: 0.1.0\nappVersion: \"0.1.0\"\n", "0.1.0"},
		{"appVersion: 1.2.3 # the release\n", "1.2.3"},
		{"appVersion: '2.0.0'\n", "2.0.0"},
		{"version: 0.1.0\n", ""},
	} {
		p := filepath.Join(dir, "Chart.yaml")
		if err := os.WriteFile(p, []byte(tc.text), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := ChartAppVersion(p)
		if got != tc.want || (tc.want == "") != errors.Is(err, ErrNoAppVersion) {
			t.Errorf("ChartAppVersion(%q) = %q, %v; want %q", tc.text, got, err, tc.want)
		}
	}
}

// TestCatalogMatchesChart: every service the Helm chart runs has an image
// of the name its default reference carries (hermod-<subchart>), built
// from that service's main package, and the chart's tag is make images'.
func TestCatalogMatchesChart(t *testing.T) {
	charts, err := filepath.Glob("../../deployments/helm/hermod/charts/*/Chart.yaml")
	if err != nil || len(charts) == 0 {
		t.Fatalf("no subcharts: %v", err)
	}
	want, err := ChartAppVersion("../../deployments/helm/hermod/Chart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range charts {
		service := filepath.Base(filepath.Dir(c))
		if service == "hermod-common" {
			continue
		}
		bins, err := Select([]string{"hermod-" + service})
		if err != nil {
			t.Errorf("subchart %s: %v", service, err)
			continue
		}
		if !strings.HasPrefix(bins[0].Package, "./services/"+service+"/cmd/") {
			t.Errorf("image %s is built from %s", bins[0].Name, bins[0].Package)
		}
		if v, err := ChartAppVersion(c); err != nil || v != want {
			t.Errorf("subchart %s appVersion %q (%v), want the chart's %q", service, v, err, want)
		}
	}
}

// TestCatalogMatchesMakefile: every image is a binary the Makefile
// builds, with the same cgo setting.
func TestCatalogMatchesMakefile(t *testing.T) {
	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	lists := map[bool][]string{false: makeList(string(mk), "PURE_BINARIES"), true: makeList(string(mk), "CGO_BINARIES")}
	for _, b := range Catalog {
		if !slices.Contains(lists[b.Cgo], b.Package) {
			t.Errorf("%s (%s, cgo %t) is not in the Makefile's list %q", b.Name, b.Package, b.Cgo, lists[b.Cgo])
		}
	}
}

// makeList returns the words of the Makefile variable name's definition
// (name := ..., continued by trailing backslashes).
func makeList(mk, name string) []string {
	var words []string
	in := false
	for line := range strings.Lines(mk) {
		if !in {
			rest, ok := strings.CutPrefix(line, name)
			if !ok || !strings.HasPrefix(strings.TrimSpace(rest), ":=") {
				continue
			}
			in, line = true, strings.TrimPrefix(strings.TrimSpace(rest), ":=")
		}
		line = strings.TrimSpace(line)
		words = append(words, strings.Fields(strings.TrimSuffix(line, "\\"))...)
		if !strings.HasSuffix(line, "\\") {
			break
		}
	}
	return words
}

// TestContainerfilesUpToDate: deployments/images/<name>/Containerfile is
// what the catalog and the build flags generate (make containerfiles).
func TestContainerfilesUpToDate(t *testing.T) {
	for _, b := range Catalog {
		want, err := Containerfile(b, GoImageVersion)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join("../../deployments/images", b.Name, "Containerfile"))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("deployments/images/%s/Containerfile is stale (%v): run make containerfiles", b.Name, err)
		}
		src := Source{Version: "${VERSION}", Commit: "${COMMIT}"}
		for _, flag := range BuildFlags(src)[:2] {
			if !bytes.Contains(want, []byte(" "+flag+" ")) {
				t.Errorf("%s: the Containerfile lacks %s", b.Name, flag)
			}
		}
	}
}
