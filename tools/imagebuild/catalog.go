// Package imagebuild builds Hermod's OCI images without a container
// engine and without pulling a base image: each image is one layer on an
// empty (scratch) base holding the binary, /etc/passwd and /etc/group with
// the non-root user 65532, the build host's CA bundle, a /tmp and, for the
// binaries that link libzmq through cgo, exactly the shared libraries the
// binary needs and the dynamic loader. Two builds of one tree give one
// digest: binaries are built with -trimpath, -buildvcs=false and an empty
// build id, and every time in the image is the commit's time.
package imagebuild

import (
	"fmt"
	"slices"
	"strings"
)

// Binary is one image: a Go main package and how it links.
type Binary struct {
	// Name is the binary's and the image repository's name
	// (hermod-gateway: ghcr.io/hermod/hermod-gateway).
	Name string
	// Package is the main package, relative to the repository root.
	Package string
	// Cgo marks the ZMQ users: built with CGO_ENABLED=1 and shipped with
	// their shared libraries; every other binary is static.
	Cgo bool
}

// Catalog is every image make images builds: the six services the Helm
// chart runs (hermod-<service>), the operator CLI, the load generator and
// the vLLM simulator. hermod-devstack (runs everything on one machine) and
// hermod-bench (a benchmark harness) are not images.
var Catalog = []Binary{
	{Name: "hermod-gateway", Package: "./services/gateway/cmd/hermod-gateway"},
	{Name: "hermod-picker", Package: "./services/picker/cmd/hermod-picker"},
	{Name: "hermod-indexer", Package: "./services/indexer/cmd/hermod-indexer", Cgo: true},
	{Name: "hermod-collector", Package: "./services/collector/cmd/hermod-collector"},
	{Name: "hermod-responses", Package: "./services/responses/cmd/hermod-responses"},
	{Name: "hermod-autoscaler", Package: "./services/autoscaler/cmd/hermod-autoscaler"},
	{Name: "hermodctl", Package: "./tools/hermodctl/cmd/hermodctl"},
	{Name: "hermod-loadgen", Package: "./tools/loadgen/cmd/hermod-loadgen"},
	{Name: "vllm-sim", Package: "./tools/vllm-sim/cmd/vllm-sim", Cgo: true},
}

// Select returns the catalog's binaries named in names (all of them when
// names is empty), in catalog order.
func Select(names []string) ([]Binary, error) {
	if len(names) == 0 {
		return slices.Clone(Catalog), nil
	}
	var out []Binary
	for _, b := range Catalog {
		if slices.Contains(names, b.Name) {
			out = append(out, b)
		}
	}
	for _, n := range names {
		if !slices.ContainsFunc(out, func(b Binary) bool { return b.Name == n }) {
			return nil, fmt.Errorf("select images: no image %q (have %s)", n, strings.Join(Names(), ", "))
		}
	}
	return out, nil
}

// Names lists the catalog's image names.
func Names() []string {
	names := make([]string, len(Catalog))
	for i, b := range Catalog {
		names[i] = b.Name
	}
	return names
}
