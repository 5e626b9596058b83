package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// binDir holds the binaries built once for the whole test run, or those
// of $HERMOD_E2E_BIN (make sets it to bin/, which it has just built).
var binDir string

// binaries are the e2e suite's programs.
var binaries = []struct {
	pkg string
	cgo bool // only the binaries that talk ZeroMQ use cgo
}{
	{"../tools/hermodctl/cmd/hermodctl", false},
	{"../tools/devstack/cmd/hermod-devstack", false},
	{"../services/gateway/cmd/hermod-gateway", false},
	{"../services/picker/cmd/hermod-picker", false},
	{"../services/collector/cmd/hermod-collector", false},
	{"../services/responses/cmd/hermod-responses", false},
	{"../services/autoscaler/cmd/hermod-autoscaler", false},
	{"../tools/vllm-sim/cmd/vllm-sim", true},
	{"../services/indexer/cmd/hermod-indexer", true},
}

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	defer func() {
		if err := kube.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
		}
	}()
	if dir := os.Getenv("HERMOD_E2E_BIN"); dir != "" {
		for _, b := range binaries {
			if _, err := os.Stat(filepath.Join(dir, filepath.Base(b.pkg))); err != nil {
				fmt.Fprintf(os.Stderr, "e2e: HERMOD_E2E_BIN=%s: %v (make binaries builds them)\n", dir, err)
				return 1
			}
		}
		binDir = dir
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "hermod-e2e-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	binDir = dir
	for _, b := range binaries {
		cmd := exec.Command("go", "build", "-o", dir, b.pkg)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b.cgo {
			cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: build %s: %v\n%s", b.pkg, err, out)
			return 1
		}
	}
	return m.Run()
}

func bin(name string) string { return filepath.Join(binDir, name) }
