package secret

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func write(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestReadFile(t *testing.T) {
	const value = "s3cr3t-value"
	for _, tc := range []struct {
		name, content, want, errHas string
	}{
		{name: "trimmed", content: "  " + value + "\n", want: value},
		{name: "inner spaces kept", content: "a b\r\n", want: "a b"},
		{name: "empty", content: " \n\t", errHas: "empty"},
		{name: "too large", content: strings.Repeat("x", MaxSize+1), errHas: "larger than"},
		{name: "at the limit", content: strings.Repeat("x", MaxSize), want: strings.Repeat("x", MaxSize)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := write(t, tc.content)
			got, err := ReadFile(p)
			if tc.errHas != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errHas) || !strings.Contains(err.Error(), p) {
					t.Fatalf("err = %v, want one naming %s and saying %q", err, p, tc.errHas)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ReadFile = %.20q, %v", got, err)
			}
		})
	}
	if _, err := ReadFile(filepath.Join(t.TempDir(), "missing")); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("missing file: %v", err)
	}
}

// Lookup takes the file or the variable, refuses both, and never puts the
// value in an error.
func TestSourceLookup(t *testing.T) {
	const value = "hunter2-do-not-print"
	file := write(t, value+"\n")
	src := Source{What: "test password", File: file, FileSetting: "--test-password-file", Env: "HERMOD_TEST_PASSWORD"}

	if v, ok, err := src.Lookup(); err != nil || !ok || v != value {
		t.Fatalf("from file: %v %v", ok, err)
	}
	t.Setenv("HERMOD_TEST_PASSWORD", value)
	_, _, err := src.Lookup()
	if err == nil || !strings.Contains(err.Error(), "--test-password-file") || !strings.Contains(err.Error(), "HERMOD_TEST_PASSWORD") || strings.Contains(err.Error(), value) {
		t.Fatalf("both set: %v", err)
	}
	fromEnv := src
	fromEnv.File = ""
	if v, ok, err := fromEnv.Lookup(); err != nil || !ok || v != value {
		t.Fatalf("from env: %v %v", ok, err)
	}
	t.Setenv("HERMOD_TEST_PASSWORD", " ")
	if _, _, err := fromEnv.Lookup(); !errors.Is(err, ErrEmpty) {
		t.Fatalf("empty env: %v", err)
	}
	none := Source{What: "x", Env: "HERMOD_TEST_UNSET_SECRET"}
	if _, ok, err := none.Lookup(); ok || err != nil {
		t.Fatalf("nothing set: %v %v", ok, err)
	}
	if _, err := none.Required(); err == nil || !strings.Contains(err.Error(), "HERMOD_TEST_UNSET_SECRET is not set") {
		t.Fatalf("Required: %v", err)
	}
	bad := src
	bad.File = write(t, "")
	bad.Env = ""
	if _, _, err := bad.Lookup(); err == nil || !strings.Contains(err.Error(), "--test-password-file") {
		t.Fatalf("empty file: %v", err)
	}
}
