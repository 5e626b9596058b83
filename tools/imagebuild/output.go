package imagebuild

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// WriteLayout writes img as the only image of a fresh OCI image layout
// directory dir, named ref (the index's org.opencontainers.image.ref.name
// and io.containerd.image.name annotations).
func WriteLayout(dir string, img v1.Image, ref string) error {
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("write OCI layout: %w", err)
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("write OCI layout %s: %w", dir, err)
	}
	anns := map[string]string{AnnotationRefName: ref, annotationContainerdName: ref}
	if err := p.AppendImage(img, layout.WithAnnotations(anns)); err != nil {
		return fmt.Errorf("write OCI layout %s: %w", dir, err)
	}
	return nil
}

// ErrNotOneImage is returned for an OCI layout that does not hold exactly
// one image.
var ErrNotOneImage = errors.New("not exactly one image")

// ReadLayout returns the one image of the OCI layout directory dir and its
// ref.name annotation.
func ReadLayout(dir string) (v1.Image, string, error) {
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, "", fmt.Errorf("read OCI layout %s: %w", dir, err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, "", fmt.Errorf("read OCI layout %s: %w", dir, err)
	}
	if len(im.Manifests) != 1 {
		return nil, "", fmt.Errorf("read OCI layout %s: %d manifests: %w", dir, len(im.Manifests), ErrNotOneImage)
	}
	img, err := idx.Image(im.Manifests[0].Digest)
	if err != nil {
		return nil, "", fmt.Errorf("read OCI layout %s: %w", dir, err)
	}
	return img, im.Manifests[0].Annotations[AnnotationRefName], nil
}

// WriteArchive writes the OCI layout directory dir as the tar archive
// path (an "oci-archive": podman load, skopeo copy oci-archive:, docker
// load all read it), entries sorted, every time mtime.
func WriteArchive(dir, path string, mtime time.Time) (err error) {
	var files []File
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		f := File{Path: "/" + filepath.ToSlash(rel), Mode: fs.ModeDir | 0o755}
		if !d.IsDir() {
			f.Mode = 0o644
			if f.Data, err = os.ReadFile(p); err != nil {
				return err
			}
		}
		files = append(files, f)
		return nil
	})
	if err != nil {
		return fmt.Errorf("archive %s: %w", dir, err)
	}
	out, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("archive %s: %w", dir, err)
	}
	defer func() {
		if cerr := out.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("archive %s: %w", dir, cerr)
		}
	}()
	return WriteTar(out, files, mtime)
}

// Push writes img to the registry as ref with the credentials of the
// default keychain (docker/podman login); localhost and private
// addresses are spoken to over plain HTTP.
func Push(ctx context.Context, img v1.Image, ref string) error {
	r, err := name.ParseReference(ref)
	if err != nil {
		return fmt.Errorf("push %s: %w", ref, err)
	}
	if err := remote.Write(r, img, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		return fmt.Errorf("push %s: %w", ref, err)
	}
	return nil
}

// PodmanLoad loads the OCI archive at path into podman's local store.
func PodmanLoad(ctx context.Context, path string, log io.Writer) error {
	cmd := exec.CommandContext(ctx, "podman", "load", "-i", path)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("podman load -i %s: %w", path, err)
	}
	return nil
}

// SanitizeRegistry trims a registry given as a URL or with a trailing
// slash to host[:port][/path].
func SanitizeRegistry(r string) string {
	r = strings.TrimPrefix(strings.TrimPrefix(r, "http://"), "https://")
	return strings.TrimSuffix(r, "/")
}
