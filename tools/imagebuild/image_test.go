package imagebuild

import (
	"context"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fakeImage is a small image around a file standing in for a binary.
func fakeImage(t *testing.T) (bin Binary, src Source, binary, ca string) {
	t.Helper()
	dir := t.TempDir()
	bin = Binary{Name: "hermod-fake", Package: "./fake"}
	binary, ca = filepath.Join(dir, "hermod-fake"), filepath.Join(dir, "ca.crt")
	for p, data := range map[string]string{binary: "#!not really\n", ca: "-----BEGIN CERTIFICATE-----\n"} {
		if err := os.WriteFile(p, []byte(data), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	src = Source{Version: "0.0.1", Commit: strings.Repeat("ab", 20), Time: time.Date(2025, 11, 26, 10, 0, 0, 0, time.UTC), URL: DefaultSourceURL}
	return bin, src, binary, ca
}

// TestPushToRegistry: an image written to an OCI layout and pushed to a
// registry (go-containerregistry's in-memory one, on a loopback port, so
// plain HTTP as for REGISTRY=localhost:5000) comes back with its digest.
func TestPushToRegistry(t *testing.T) {
	bin, src, binary, ca := fakeImage(t)
	files, err := RootFS(bin, binary, ca, nil)
	if err != nil {
		t.Fatal(err)
	}
	img, err := Image(bin, files, src)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "layout")
	if err := WriteLayout(dir, img, Ref(DefaultRegistry, bin, src.Version)); err != nil {
		t.Fatal(err)
	}
	fromLayout, _, err := ReadLayout(dir)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	ref := Ref(SanitizeRegistry(srv.URL), bin, src.Version)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := Push(ctx, fromLayout, ref); err != nil {
		t.Fatal(err)
	}
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	pulled, err := remote.Image(r, remote.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := img.Digest()
	if got, err := pulled.Digest(); err != nil || got != want {
		t.Errorf("pulled %s (%v), pushed %s", got, err, want)
	}
	srv.CloseClientConnections()
}

// TestImageConfig: the config and manifest of an image, and that the
// same inputs give the same digest.
func TestImageConfig(t *testing.T) {
	bin, src, binary, ca := fakeImage(t)
	src.Modified = true
	var digests []string
	for range 2 {
		files, err := RootFS(bin, binary, ca, nil)
		if err != nil {
			t.Fatal(err)
		}
		img, err := Image(bin, files, src)
		if err != nil {
			t.Fatal(err)
		}
		d, err := img.Digest()
		if err != nil {
			t.Fatal(err)
		}
		digests = append(digests, d.String())
		cfg, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		c := cfg.Config
		if c.User != "65532:65532" || len(c.Entrypoint) != 1 || c.Entrypoint[0] != "/usr/local/bin/hermod-fake" {
			t.Errorf("user %q, entrypoint %q", c.User, c.Entrypoint)
		}
		want := map[string]string{
			LabelSource: DefaultSourceURL, LabelRevision: src.Commit, LabelVersion: "0.0.1",
			LabelCreated: "2025-11-26T10:00:00Z", LabelTitle: "hermod-fake", LabelModified: "true",
		}
		m, err := img.Manifest()
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range want {
			if c.Labels[k] != v || m.Annotations[k] != v {
				t.Errorf("%s: label %q, annotation %q; want %q", k, c.Labels[k], m.Annotations[k], v)
			}
		}
		if len(c.Labels) != len(want) || !cfg.Created.Equal(src.Time) || len(cfg.History) != 1 || !cfg.History[0].Created.Equal(src.Time) {
			t.Errorf("labels %v, created %v, history %v", c.Labels, cfg.Created, cfg.History)
		}
		if m.MediaType != "application/vnd.oci.image.manifest.v1+json" || m.Config.MediaType != "application/vnd.oci.image.config.v1+json" {
			t.Errorf("media types %s, %s", m.MediaType, m.Config.MediaType)
		}
	}
	if digests[0] != digests[1] {
		t.Errorf("one input, two digests: %q", digests)
	}
}
