package e2e

import (
	"bytes"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// referenceConfigs are the configurations of the reference documents,
// rebuilt as fixtures next to the plugin registry.
const referenceConfigs = "../libs/plugins/standard/testdata/reference"

func hermodctl(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(bin("hermodctl"), args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		code = exit.ExitCode()
	default:
		t.Fatalf("run hermodctl: %v", err)
	}
	return out.String(), errb.String(), code
}

func TestConfigValidateReferenceConfigs(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(referenceConfigs, "*.yaml"))
	if err != nil || len(files) < 4 {
		t.Fatalf("reference fixtures: %v (%d files)", err, len(files))
	}
	stdout, stderr, code := hermodctl(t, append([]string{"config", "validate"}, files...)...)
	if code != 0 {
		t.Fatalf("exit %d, want 0\nstderr:\n%s", code, stderr)
	}
	for _, f := range files {
		if !strings.Contains(stdout, "# "+f+": valid") {
			t.Errorf("output does not report %s valid:\n%s", f, stdout)
		}
	}
	// The effective reference/000 config shows its weighted scorers and
	// the plugins added by default, in the llm-d.ai layout.
	for _, want := range []string{"apiVersion: llm-d.ai/v1alpha1", "type: single-profile-handler # default", "type: no-hit-lru-scorer", "maxNumOfEndpoints: 2"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("resolved output lacks %q", want)
		}
	}
}

func TestConfigValidateHeimdallValuesFile(t *testing.T) {
	stdout, stderr, code := hermodctl(t, "config", "validate", "-o", "json", filepath.Join(referenceConfigs, "003-deployment-values.yaml"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{`"type": "context-length-aware"`, `"weight": 2`} {
		if !strings.Contains(stdout, want) {
			t.Errorf("json output lacks %s:\n%s", want, stdout)
		}
	}
}

func TestConfigValidateInvalid(t *testing.T) {
	dir := t.TempDir()
	bad := writeFile(t, dir, "bad.yaml", `
apiVersion: inference.networking.x-k8s.io/v1alpha1
kind: EndpointPickerConfig
featureGates: [noSuchGate]
plugins:
- type: load-aware-scorer
  parameters:
    threshold: lots
`)
	good := filepath.Join(referenceConfigs, "001-disagg-canonical.yaml")
	stdout, stderr, code := hermodctl(t, "config", "validate", good, bad)
	if code != 1 {
		t.Fatalf("exit %d, want 1\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, good+": valid") {
		t.Errorf("the valid file is not reported valid:\n%s", stdout)
	}
	for _, want := range []string{bad + ": invalid", `featureGates[0]: unknown feature gate "noSuchGate"`, "plugins[0] (load-aware-scorer): parameters.threshold: must be an integer"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
}

func TestConfigValidateStrictAndUsage(t *testing.T) {
	warn := filepath.Join(referenceConfigs, "003-pd-context-length.yaml")
	if _, stderr, code := hermodctl(t, "config", "validate", "-strict", warn); code != 1 || !strings.Contains(stderr, "are errors with -strict") {
		t.Errorf("-strict with warnings: exit %d, stderr %q", code, stderr)
	}
	if _, _, code := hermodctl(t, "config", "validate"); code != 2 {
		t.Errorf("no files: exit %d, want 2", code)
	}
	if _, _, code := hermodctl(t, "nonsense"); code != 2 {
		t.Errorf("unknown command: exit %d, want 2", code)
	}
	if _, _, code := hermodctl(t, "config", "validate", "/nonexistent.yaml"); code != 1 {
		t.Errorf("missing file: exit %d, want 1", code)
	}
}
