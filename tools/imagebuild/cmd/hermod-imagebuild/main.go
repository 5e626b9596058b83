// Command hermod-imagebuild builds Hermod's OCI images without a container
// engine (make images): see package imagebuild.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/hermod/hermod/tools/imagebuild"
)

type config struct {
	root, out, version, registry, push, caBundle, sourceURL, goTool string
	images, containerfiles                                          string
	podman                                                          bool
}

func main() {
	var c config
	fs := flag.NewFlagSet("hermod-imagebuild", flag.ExitOnError)
	fs.StringVar(&c.root, "root", ".", "the repository's root")
	fs.StringVar(&c.out, "out", "bin/images", "where to write the OCI layouts and archives")
	fs.StringVar(&c.version, "version", "", "the images' tag and the binaries' version (default: the Helm chart's appVersion)")
	fs.StringVar(&c.registry, "registry", imagebuild.DefaultRegistry, "the registry and path the images are named in")
	fs.StringVar(&c.push, "push", "", "also push every image to this registry (host:port[/path]), as <push>/<name>:<version>")
	fs.BoolVar(&c.podman, "podman", false, "also load every image into podman's store (podman load)")
	fs.StringVar(&c.images, "images", "", "comma-separated images to build (default: all)")
	fs.StringVar(&c.caBundle, "ca-bundle", "/etc/ssl/certs/ca-certificates.crt", "the CA bundle copied into the images")
	fs.StringVar(&c.sourceURL, "source-url", imagebuild.DefaultSourceURL, "the org.opencontainers.image.source label")
	fs.StringVar(&c.goTool, "go", "go", "the go command")
	fs.StringVar(&c.containerfiles, "containerfiles", "", "write each image's Containerfile under this directory (<dir>/<name>/Containerfile) and build nothing")
	_ = fs.Parse(os.Args[1:])
	if c.containerfiles != "" {
		if err := imagebuild.WriteContainerfiles(c.containerfiles, imagebuild.GoImageVersion); err != nil {
			fmt.Fprintf(os.Stderr, "hermod-imagebuild: %v\n", err)
			os.Exit(1)
		}
		return
	}
	if err := run(context.Background(), c); err != nil {
		fmt.Fprintf(os.Stderr, "hermod-imagebuild: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, c config) error {
	root, err := filepath.Abs(c.root)
	if err != nil {
		return fmt.Errorf("root: %w", err)
	}
	src := imagebuild.Source{Version: c.version, URL: c.sourceURL}
	if src.Version == "" {
		if src.Version, err = imagebuild.ChartAppVersion(filepath.Join(root, "deployments/helm/hermod/Chart.yaml")); err != nil {
			return err
		}
	}
	if src.Commit, src.Time, src.Modified, err = imagebuild.ReadGit(ctx, root); err != nil {
		return err
	}
	var names []string
	if c.images != "" {
		names = strings.Split(c.images, ",")
	}
	bins, err := imagebuild.Select(names)
	if err != nil {
		return err
	}
	if c.podman {
		if _, err := exec.LookPath("podman"); err != nil {
			return fmt.Errorf("--podman: %w", err)
		}
	}
	results, err := imagebuild.Build(ctx, imagebuild.Options{
		Root: root, OutDir: c.out, GoTool: c.goTool, CABundle: c.caBundle,
		Registry: imagebuild.SanitizeRegistry(c.registry), Binaries: bins, Source: src, Log: os.Stderr,
	})
	if err != nil {
		return err
	}
	fmt.Printf("commit %s (%s)%s\n", src.Commit, src.Time.Format("2006-01-02T15:04:05Z"), map[bool]string{true: ", with changes", false: ""}[src.Modified])
	for _, r := range results {
		fmt.Printf("%-44s %s %6.1f MB  %s\n", r.Ref, r.Digest, float64(r.Size)/1e6, r.Archive)
		if err := publish(ctx, c, r, src.Version); err != nil {
			return err
		}
	}
	return nil
}

// publish pushes and loads one image as c asks.
func publish(ctx context.Context, c config, r imagebuild.Result, version string) error {
	if c.push != "" {
		img, _, err := imagebuild.ReadLayout(r.Layout)
		if err != nil {
			return err
		}
		ref := imagebuild.Ref(imagebuild.SanitizeRegistry(c.push), r.Binary, version)
		if err := imagebuild.Push(ctx, img, ref); err != nil {
			return err
		}
		fmt.Printf("  pushed %s\n", ref)
	}
	if c.podman {
		return imagebuild.PodmanLoad(ctx, r.Archive, os.Stderr)
	}
	return nil
}
