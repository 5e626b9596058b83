package imagebuild

import (
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
)

// ErrLibraryNotFound is returned when the loader cannot resolve a library
// a binary needs.
var ErrLibraryNotFound = errors.New("shared library not found")

// SharedLibraries returns the files a dynamically linked binary needs at
// run time on the build host: its ELF interpreter (the dynamic loader) and
// every library ldd resolves, as absolute paths, sorted. A static binary
// needs none.
func SharedLibraries(ctx context.Context, binary string) ([]string, error) {
	interp, err := interpreter(binary)
	if err != nil || interp == "" {
		return nil, err
	}
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "ldd", binary)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("ldd %s: %w: %s", binary, err, strings.TrimSpace(stderr.String()))
	}
	libs, err := parseLdd(string(out))
	if err != nil {
		return nil, fmt.Errorf("ldd %s: %w", binary, err)
	}
	if !slices.Contains(libs, interp) {
		libs = append(libs, interp)
		slices.Sort(libs)
	}
	return libs, nil
}

// interpreter returns the ELF interpreter a binary names, "" for a static
// binary.
func interpreter(binary string) (string, error) {
	f, err := elf.Open(binary)
	if err != nil {
		return "", fmt.Errorf("read ELF %s: %w", binary, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type != elf.PT_INTERP {
			continue
		}
		buf := make([]byte, p.Filesz)
		if _, err := p.ReadAt(buf, 0); err != nil {
			return "", fmt.Errorf("read ELF interpreter of %s: %w", binary, err)
		}
		return string(bytes.TrimRight(buf, "\x00")), nil
	}
	return "", nil
}

// parseLdd returns the absolute paths ldd's output lists, sorted and
// without repeats; the vDSO (no file) is left out.
func parseLdd(out string) ([]string, error) {
	var libs []string
	for line := range strings.Lines(out) {
		line = strings.TrimSpace(line)
		name, target, arrow := strings.Cut(line, "=>")
		if !arrow {
			target = name
		}
		target = strings.TrimSpace(target)
		if strings.HasPrefix(target, "not found") {
			return nil, fmt.Errorf("%s: %w", strings.TrimSpace(name), ErrLibraryNotFound)
		}
		path, _, _ := strings.Cut(target, " ")
		if strings.HasPrefix(path, "/") && !slices.Contains(libs, path) {
			libs = append(libs, path)
		}
	}
	slices.Sort(libs)
	return libs, nil
}
