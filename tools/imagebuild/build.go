package imagebuild

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Options are one make images run.
type Options struct {
	// Root is the repository's root (go.work's directory), OutDir where
	// the images go: OutDir/<name> (an OCI layout) and OutDir/<name>.tar
	// (the same as an OCI archive), and OutDir/images.txt (reference,
	// digest, size of each).
	Root, OutDir string
	// GoTool is the go command; CABundle the host's CA bundle file.
	GoTool, CABundle string
	// Registry prefixes the images' names (ghcr.io/hermod).
	Registry string
	// Binaries are the images to build.
	Binaries []Binary
	// Source is what the images say about their tree.
	Source Source
	// Log gets go build's output.
	Log io.Writer
}

// Result is one built image.
type Result struct {
	Binary Binary
	// Ref is its name, Digest its manifest's digest, Size the bytes of
	// its compressed layer.
	Ref, Digest string
	Size        int64
	// Layout and Archive are the files written.
	Layout, Archive string
	// Libraries are the shared libraries shipped (cgo binaries).
	Libraries []string
}

// Build builds the binaries, then each image, and writes them.
func Build(ctx context.Context, opt Options) ([]Result, error) {
	if err := os.MkdirAll(opt.OutDir, 0o755); err != nil {
		return nil, fmt.Errorf("build images: %w", err)
	}
	binDir, err := os.MkdirTemp(opt.OutDir, ".bin-")
	if err != nil {
		return nil, fmt.Errorf("build images: %w", err)
	}
	defer os.RemoveAll(binDir)
	if err := GoBuild(ctx, opt.GoTool, opt.Root, binDir, opt.Binaries, opt.Source, opt.Log); err != nil {
		return nil, err
	}
	var results []Result
	for _, bin := range opt.Binaries {
		r, err := buildOne(ctx, opt, bin, filepath.Join(binDir, bin.Name))
		if err != nil {
			return nil, err
		}
		results = append(results, r)
	}
	var list strings.Builder
	for _, r := range results {
		fmt.Fprintf(&list, "%s %s %d\n", r.Ref, r.Digest, r.Size)
	}
	if err := os.WriteFile(filepath.Join(opt.OutDir, "images.txt"), []byte(list.String()), 0o644); err != nil {
		return nil, fmt.Errorf("build images: %w", err)
	}
	return results, nil
}

// buildOne assembles and writes bin's image from the built binary.
func buildOne(ctx context.Context, opt Options, bin Binary, binary string) (Result, error) {
	r := Result{Binary: bin, Ref: Ref(opt.Registry, bin, opt.Source.Version)}
	var err error
	if bin.Cgo {
		if r.Libraries, err = SharedLibraries(ctx, binary); err != nil {
			return r, err
		}
	}
	files, err := RootFS(bin, binary, opt.CABundle, r.Libraries)
	if err != nil {
		return r, err
	}
	img, err := Image(bin, files, opt.Source)
	if err != nil {
		return r, err
	}
	digest, err := img.Digest()
	if err != nil {
		return r, fmt.Errorf("image %s: digest: %w", bin.Name, err)
	}
	r.Digest = digest.String()
	layers, err := img.Layers()
	if err != nil {
		return r, fmt.Errorf("image %s: layers: %w", bin.Name, err)
	}
	for _, l := range layers {
		n, err := l.Size()
		if err != nil {
			return r, fmt.Errorf("image %s: layer size: %w", bin.Name, err)
		}
		r.Size += n
	}
	r.Layout = filepath.Join(opt.OutDir, bin.Name)
	r.Archive = r.Layout + ".tar"
	if err := WriteLayout(r.Layout, img, r.Ref); err != nil {
		return r, err
	}
	return r, WriteArchive(r.Layout, r.Archive, opt.Source.Time)
}
