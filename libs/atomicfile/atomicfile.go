// Package atomicfile replaces files so that readers see the old content or
// the new, never a part: the data goes to a temporary file in the same
// directory, renamed over the target.
package atomicfile

import (
	"os"
	"path/filepath"
)

// WriteFile replaces path with data, with mode (0: the mode path has, or
// 0o644 when it does not exist).
func WriteFile(path string, data []byte, mode os.FileMode) error {
	if mode == 0 {
		mode = 0o644
		if st, err := os.Stat(path); err == nil {
			mode = st.Mode().Perm()
		}
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
