package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	_ "github.com/hermod/hermod/libs/plugins/standard"
)

func run(args ...string) (string, string, int) {
	var out, errb bytes.Buffer
	code := Run(context.Background(), args, &out, &errb)
	return out.String(), errb.String(), code
}

func TestUsage(t *testing.T) {
	out, _, code := run()
	if code != ExitOK || !strings.Contains(out, "config validate") {
		t.Errorf("no args: code %d, %q", code, out)
	}
	for _, args := range [][]string{{"bogus"}, {"config"}, {"config", "bogus"}} {
		if _, errs, code := run(args...); code != ExitUsage || !strings.Contains(errs, "Usage:") {
			t.Errorf("%v: code %d, stderr %q", args, code, errs)
		}
	}
	if _, _, code := run("config", "validate", "-o", "xml", "f"); code != ExitUsage {
		t.Errorf("-o xml: code %d", code)
	}
	if _, _, code := run("config", "validate", "-h"); code != ExitOK {
		t.Errorf("-h: code %d", code)
	}
}

func TestValidateOutputs(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	if err := os.WriteFile(good, []byte("plugins: [{type: queue-scorer, parameters: {threshold: 3}}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, _, code := run("config", "validate", good)
	if code != ExitOK {
		t.Fatalf("code %d", code)
	}
	for _, want := range []string{"valid (1 warning)", "# warning: plugins[0] (queue-scorer): parameters.threshold: unknown parameter, ignored",
		"apiVersion: llm-d.ai/v1alpha1\nkind: EndpointPickerConfig\n", "type: single-profile-handler # default", "- pluginRef: queue-scorer\n        weight: 1"} {
		if !strings.Contains(out, want) {
			t.Errorf("yaml output lacks %q:\n%s", want, out)
		}
	}
	// The output loads as it is, into the same configuration.
	again := filepath.Join(dir, "again.yaml")
	if err := os.WriteFile(again, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	out2, _, code := run("config", "validate", again)
	// (what was added by default is declared now: only its comment goes)
	body := func(s string) string {
		return lineComment.ReplaceAllString(strings.SplitN(s, "apiVersion:", 2)[1], "")
	}
	if code != ExitOK || body(out2) != body(out) {
		t.Errorf("the effective config loads differently (code %d):\n%s\n---\n%s", code, out, out2)
	}
	out, _, _ = run("config", "validate", "-o", "json", good)
	if !strings.Contains(out, `"apiVersion": "llm-d.ai/v1alpha1"`) || !strings.Contains(out, `"type": "single-profile-handler"`) {
		t.Errorf("json output:\n%s", out)
	}
	out, _, _ = run("config", "validate", "-o", "none", good)
	if want := "# " + good + ": valid (1 warning)\n# warning: plugins[0] (queue-scorer): parameters.threshold: unknown parameter, ignored"; strings.TrimSpace(out) != want {
		t.Errorf("none output: %q", out)
	}
	if _, errs, code := run("config", "validate", "-strict", good); code != ExitFailure || !strings.Contains(errs, "unknown parameter") {
		t.Errorf("-strict: code %d %q", code, errs)
	}
}

var lineComment = regexp.MustCompile(`(?m) # .*$`)

// config convert rewrites an old-layout file in the llm-d.ai layout,
// saying what it changed; -w writes it back; the result converts to
// itself and builds into the same scheduler as the original.
func TestConvert(t *testing.T) {
	dir := t.TempDir()
	old := filepath.Join(dir, "old.yaml")
	const doc = `apiVersion: inference.networking.x-k8s.io/v1alpha1
kind: EndpointPickerConfig
featureGates: [dataLayer, flowControl]
plugins:
- type: queue-scorer
- type: openai-parser
schedulingProfiles:
- name: default
  plugins: [{pluginRef: queue-scorer, weight: 2}]
parser: {pluginRef: openai-parser}
saturationDetector: {queueDepthThreshold: 7}
data: {sources: []}
`
	if err := os.WriteFile(old, []byte(doc), 0o640); err != nil {
		t.Fatal(err)
	}
	out, errs, code := run("config", "convert", old)
	if code != ExitOK {
		t.Fatalf("code %d: %s", code, errs)
	}
	for _, want := range []string{"apiVersion: llm-d.ai/v1alpha1", "featureGates:\n  - flowControl\n", "requestHandler:\n  parsers:\n    - pluginRef: openai-parser",
		"name: saturation-detector\n    type: utilization-detector\n    parameters:\n      queueDepthThreshold: 7", "flowControl:\n  saturationDetector:\n    pluginRef: saturation-detector", "dataLayer:"} {
		if !strings.Contains(out, want) {
			t.Errorf("converted output lacks %q:\n%s", want, out)
		}
	}
	for _, want := range []string{"apiVersion: inference.networking.x-k8s.io/v1alpha1 is deprecated", "use requestHandler.parsers", "use flowControl.saturationDetector", "dataLayer changes nothing", "called dataLayer"} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errs)
		}
	}
	before, _, _ := run("config", "validate", "-o", "json", old)
	if _, errs, code := run("config", "convert", "-w", old); code != ExitOK {
		t.Fatalf("-w: code %d: %s", code, errs)
	}
	written, err := os.ReadFile(old)
	if err != nil || string(written) != out {
		t.Fatalf("-w wrote %q (%v), want %q", written, err, out)
	}
	if st, err := os.Stat(old); err != nil || st.Mode().Perm() != 0o640 {
		t.Errorf("-w changed the mode: %v %v", st.Mode(), err)
	}
	again, errs, _ := run("config", "convert", old)
	if again != out || errs != "" {
		t.Errorf("converting the converted file changes it:\n%s\nstderr %q", again, errs)
	}
	after, _, _ := run("config", "validate", "-o", "json", old)
	if strings.SplitN(before, "\n{", 2)[1] != strings.SplitN(after, "\n{", 2)[1] {
		t.Errorf("the converted config runs differently:\n%s\n---\n%s", before, after)
	}
	if _, errs, code := run("config", "convert", filepath.Join(dir, "missing.yaml")); code != ExitFailure || !strings.Contains(errs, "no such file") {
		t.Errorf("missing file: code %d %q", code, errs)
	}
}
