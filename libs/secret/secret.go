// Package secret reads secrets (passwords, tokens) from files or from the
// environment, never from command-line flags, which any local user sees in
// ps and /proc/<pid>/cmdline. A secret's value never appears in an error:
// errors name the file or the variable.
package secret

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// MaxSize bounds a secret file: a password or token file is small, and a
// path pointing at something else (a log, a device) must not be read whole.
const MaxSize = 64 << 10

// ErrEmpty says a secret file or variable holds nothing but white space.
var ErrEmpty = errors.New("secret is empty")

// ReadFile reads the secret in the file at path: its content without
// leading and trailing white space (the newline editors add). The file
// must hold at most MaxSize bytes and something besides white space.
func ReadFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("read secret: %w", err)
	}
	defer func() { _ = f.Close() }()
	b, err := io.ReadAll(io.LimitReader(f, MaxSize+1))
	if err != nil {
		return "", fmt.Errorf("read secret file %s: %w", path, err)
	}
	if len(b) > MaxSize {
		return "", fmt.Errorf("secret file %s: larger than %d bytes", path, MaxSize)
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "", fmt.Errorf("secret file %s: %w", path, ErrEmpty)
	}
	return s, nil
}

// Source says where one secret may come from: a file (a flag or config
// field naming it) or an environment variable holding the value itself.
type Source struct {
	// What names the secret in errors ("etcd password").
	What string
	// File is the path of the secret file; FileSetting names the setting
	// that gave it ("--etcd-password-file").
	File, FileSetting string
	// Env is the environment variable that may hold the secret.
	Env string
}

// Lookup returns the secret from the file or else from the environment
// variable, and whether there is one at all. Both set is an error (which
// one is meant is unclear); so are an unreadable or empty file and an
// empty variable.
func (s Source) Lookup() (value string, ok bool, err error) {
	env, inEnv := "", false
	if s.Env != "" {
		env, inEnv = os.LookupEnv(s.Env)
	}
	switch {
	case s.File != "" && inEnv:
		return "", false, fmt.Errorf("%s: both %s and %s are set; set one", s.What, s.FileSetting, s.Env)
	case s.File != "":
		v, err := ReadFile(s.File)
		if err != nil {
			return "", false, fmt.Errorf("%s (%s): %w", s.What, s.FileSetting, err)
		}
		return v, true, nil
	case inEnv:
		v := strings.TrimSpace(env)
		if v == "" {
			return "", false, fmt.Errorf("%s: %s is set but %w", s.What, s.Env, ErrEmpty)
		}
		return v, true, nil
	}
	return "", false, nil
}

// Required is Lookup for a secret that must be there: neither source set
// is an error too.
func (s Source) Required() (string, error) {
	v, ok, err := s.Lookup()
	switch {
	case err != nil:
		return "", err
	case !ok && s.File == "":
		return "", fmt.Errorf("%s: %s is not set", s.What, s.Env)
	}
	return v, nil
}
