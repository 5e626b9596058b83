package grpcauthz

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	pickerv1 "github.com/hermod/hermod/libs/api/hermod/picker/v1"
)

func TestDecodePolicy(t *testing.T) {
	loadgen := Peer{Verified: true, Identity: "loadgen"}
	p, err := DecodePolicy([]byte(`
rules:
- methods: ["/hermod.picker.v1.PickerService/Pick"]
  allow: [gateway, loadgen]
- methods: ["/envoy.service.ext_proc.v3.ExternalProcessor/Process"]
  allow: [authenticated]
`), DefaultPolicy())
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case !p.Allowed(pickerv1.PickerService_Pick_FullMethodName, loadgen):
		t.Error("the file's rule does not apply")
	case p.Allowed(pickerv1.PickerService_Complete_FullMethodName, loadgen) || !p.Allowed(pickerv1.PickerService_Complete_FullMethodName, gateway):
		t.Error("the defaults of other methods are not inherited")
	case !p.Allowed(ExtProcProcess, nameless) || p.Allowed(ExtProcProcess, anon):
		t.Error("authenticated")
	}
	p, err = DecodePolicy([]byte("inheritDefaults: false\nrules:\n- {methods: ['*'], allow: ['*']}\n"), DefaultPolicy())
	if err != nil {
		t.Fatal(err)
	}
	if !p.Allowed(pickerv1.PickerService_Pick_FullMethodName, anon) || len(p.Rules()) != 1 {
		t.Errorf("without the defaults: %v", p.Rules())
	}
	for _, c := range []struct{ in, want string }{
		{"", "empty"},
		{"rulez: []", "field rulez not found"},
		{"rules:\n- methods: [/a.S/M]\n  allow: [x]\n  deny: [y]", "field deny not found"},
		{"rules:\n- allow: [x]", "no methods"},
		{"rules:\n- methods: [/a.S/M]\n  allow: [x]\n- methods: [/a.S/M]\n  allow: [y]", "more than one rule"},
		{"rules:\n- methods: [a.S/M]\n  allow: [x]", `"a.S/M"`},
		{"rules:\n- methods: [/a.S/M]\n  allow: [X]", `caller "X"`},
		{"rules: []\n---\nrules: []", "more than one YAML document"},
		{"inheritDefaults: maybe", "decode"},
	} {
		if _, err := DecodePolicy([]byte(c.in), DefaultPolicy()); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want %q", c.in, err, c.want)
		}
	}
}

func TestLoadPolicyNamesTheFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "authz.yaml")
	if err := os.WriteFile(path, []byte("rules: [{methods: [nope], allow: [x]}]"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadPolicy(path); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("error %v does not name the file", err)
	}
	if _, err := LoadPolicy(filepath.Join(dir, "missing.yaml")); err == nil || !strings.Contains(err.Error(), "missing.yaml") {
		t.Errorf("error %v does not name the file", err)
	}
}

// FuzzDecodePolicy: any input decodes to a policy or an error, never a
// panic; a decoded policy answers for any method and peer, and its rules
// decode again to the same rules.
func FuzzDecodePolicy(f *testing.F) {
	for _, s := range []string{
		"rules:\n- methods: [/a.S/M, /a.S/*]\n  allow: [x, '*']\n",
		"inheritDefaults: false\nrules:\n- {methods: ['*'], allow: [authenticated]}\n",
		"rules: []", "", "---\n---", "rules: [{methods: [/a/b], allow: [[x]]}]", "inheritDefaults: 1",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := DecodePolicy(data, DefaultPolicy())
		if err != nil {
			return
		}
		for key, callers := range p.Rules() {
			p.Allowed(key, Peer{Verified: true, Identity: "x"})
			for _, c := range callers {
				if c != AnyCaller && c != Authenticated && !validName(c) {
					t.Fatalf("rule %s holds caller %q", key, c)
				}
			}
		}
		again, err := NewPolicy(p.Rules())
		if err != nil {
			t.Fatalf("the decoded rules do not build again: %v", err)
		}
		if len(again.Rules()) != len(p.Rules()) {
			t.Fatal("rules changed on a rebuild")
		}
	})
}
