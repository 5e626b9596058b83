package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWriteFileKeepsTheMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	if err := WriteFile(path, []byte("a"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(path, []byte("bb"), 0); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	st, _ := os.Stat(path)
	if err != nil || string(b) != "bb" || st.Mode().Perm() != 0o600 {
		t.Fatalf("content %q, mode %v, %v", b, st.Mode(), err)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("%d files left, want only the target", len(entries))
	}
}
