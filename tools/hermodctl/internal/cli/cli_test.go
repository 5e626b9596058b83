package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
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
	for _, want := range []string{"valid (1 warning)", "profileHandler: single-profile-handler", "- name: queue-scorer", "weight: 1", "parameters.threshold: unknown parameter, ignored"} {
		if !strings.Contains(out, want) {
			t.Errorf("yaml output lacks %q:\n%s", want, out)
		}
	}
	out, _, _ = run("config", "validate", "-o", "json", good)
	if !strings.Contains(out, `"profileHandler": "single-profile-handler"`) {
		t.Errorf("json output:\n%s", out)
	}
	out, _, _ = run("config", "validate", "-o", "none", good)
	if strings.TrimSpace(out) != "# "+good+": valid (1 warning)" {
		t.Errorf("none output: %q", out)
	}
	if _, errs, code := run("config", "validate", "-strict", good); code != ExitFailure || !strings.Contains(errs, "unknown parameter") {
		t.Errorf("-strict: code %d %q", code, errs)
	}
}
