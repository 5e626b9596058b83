package imagebuild

import (
	"bytes"
	"fmt"
	"io"
	"path"
	"runtime"
	"strconv"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// DefaultRegistry is where the Helm chart's default image references
// point: <registry>/<name>:<chart appVersion>.
const DefaultRegistry = "ghcr.io/hermod"

// The OCI annotation and label keys the images carry.
const (
	LabelSource   = "org.opencontainers.image.source"
	LabelRevision = "org.opencontainers.image.revision"
	LabelVersion  = "org.opencontainers.image.version"
	LabelCreated  = "org.opencontainers.image.created"
	LabelTitle    = "org.opencontainers.image.title"
	// LabelModified is set ("true") on an image built from a working
	// tree that differed from the commit its revision label names.
	LabelModified = "dev.hermod.image.tree-modified"
	// AnnotationRefName names an image in an OCI layout's index.
	AnnotationRefName = "org.opencontainers.image.ref.name"
	// annotationContainerdName is the full reference containerd (and so
	// docker load) gives an image imported from an OCI archive.
	annotationContainerdName = "io.containerd.image.name"
)

// Ref is an image's reference: registry/name:version.
func Ref(registry string, bin Binary, version string) string {
	return registry + "/" + bin.Name + ":" + version
}

// Labels are the OCI labels of bin's image built from src; the image's
// manifest carries them as annotations too.
func Labels(bin Binary, src Source) map[string]string {
	labels := map[string]string{
		LabelSource:   src.URL,
		LabelRevision: src.Commit,
		LabelVersion:  src.Version,
		LabelCreated:  src.Time.UTC().Format(timeFormat),
		LabelTitle:    bin.Name,
	}
	if src.Modified {
		labels[LabelModified] = "true"
	}
	return labels
}

// Image assembles bin's image: one gzip layer holding files on an empty
// base, an OCI manifest and config, the binary as the entrypoint, the
// nonroot user, the labels, and src's commit time as every time.
func Image(bin Binary, files []File, src Source) (v1.Image, error) {
	var buf bytes.Buffer
	if err := WriteTar(&buf, files, src.Time); err != nil {
		return nil, fmt.Errorf("image %s: %w", bin.Name, err)
	}
	layerTar := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("image %s: layer: %w", bin.Name, err)
	}
	created := v1.Time{Time: src.Time.UTC()}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History:   v1.History{Created: created, CreatedBy: "hermod-imagebuild " + bin.Name, Comment: bin.Package},
	})
	if err != nil {
		return nil, fmt.Errorf("image %s: append layer: %w", bin.Name, err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("image %s: config: %w", bin.Name, err)
	}
	cfg = cfg.DeepCopy()
	cfg.Created, cfg.OS, cfg.Architecture = created, "linux", runtime.GOARCH
	cfg.Config = v1.Config{
		Entrypoint: []string{path.Join(BinDir, bin.Name)},
		User:       strconv.Itoa(NonRoot) + ":" + strconv.Itoa(NonRoot),
		Env:        []string{"PATH=" + BinDir + ":/usr/bin:/bin"},
		WorkingDir: "/",
		Labels:     Labels(bin, src),
	}
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		return nil, fmt.Errorf("image %s: set config: %w", bin.Name, err)
	}
	annotated, ok := mutate.Annotations(img, Labels(bin, src)).(v1.Image)
	if !ok {
		return nil, fmt.Errorf("image %s: annotations: not an image", bin.Name)
	}
	return annotated, nil
}
