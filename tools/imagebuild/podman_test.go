package imagebuild

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// podmanRun loads the OCI archive into a throwaway podman store (vfs, in
// a temporary directory: the user's store is left alone) and runs ref
// --version for real, when podman is installed. Flags podman needs on
// this machine come from $HERMOD_PODMAN_RUN_ARGS (in a sandbox without
// cgroup v2 or the right to raise rlimits: "--runtime runc --ulimit
// nofile=1024:1024 --ulimit nproc=1024:1024"). When the engine itself
// cannot start a container (exit 125 or 126, an OCI runtime error) the
// run is logged, not failed: the image was checked unpacked.
func podmanRun(ctx context.Context, t *testing.T, archive, ref, want string) {
	t.Helper()
	if _, err := exec.LookPath("podman"); err != nil {
		t.Logf("no podman: %s is not run by an engine", ref)
		return
	}
	// Not t.TempDir: podman refuses a runroot path over 50 bytes.
	store, err := os.MkdirTemp("", "hermod-podman-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.RemoveAll(store); err != nil {
			t.Logf("remove podman store: %v", err)
		}
	})
	base := []string{"--root", filepath.Join(store, "root"), "--runroot", filepath.Join(store, "run"), "--storage-driver", "vfs"}
	if out, err := exec.CommandContext(ctx, "podman", append(base, "load", "-i", archive)...).CombinedOutput(); err != nil {
		t.Errorf("podman load -i %s: %v: %s", archive, err, out)
		return
	}
	args := append(base, "run", "--rm", "--network=none")
	args = append(args, strings.Fields(os.Getenv("HERMOD_PODMAN_RUN_ARGS"))...)
	args = append(args, ref, "--version")
	out, err := exec.CommandContext(ctx, "podman", args...).CombinedOutput()
	var exit *exec.ExitError
	if errors.As(err, &exit) && (exit.ExitCode() == 125 || exit.ExitCode() == 126) && strings.Contains(string(out), "OCI") {
		t.Logf("podman cannot run containers here (set HERMOD_PODMAN_RUN_ARGS): %s", strings.TrimSpace(string(out)))
		return
	}
	if err != nil || !strings.HasPrefix(string(out), want) {
		t.Errorf("podman run %s --version: %v: %q, want %q...", ref, err, out, want)
		return
	}
	t.Logf("podman run %s --version: %s", ref, strings.TrimSpace(string(out)))
}
