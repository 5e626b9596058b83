package imagebuild

import (
	"archive/tar"
	"embed"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"time"
)

// NonRoot is the user and group every image runs as (distroless's
// "nonroot"), named in the image's /etc/passwd and /etc/group.
const NonRoot = 65532

// Paths in every image.
const (
	BinDir   = "/usr/local/bin"
	CABundle = "/etc/ssl/certs/ca-certificates.crt"
)

// etcFiles are /etc/passwd and /etc/group; the Containerfile copies the
// same files.
//
//go:embed rootfs/etc/passwd rootfs/etc/group
var etcFiles embed.FS

// File is one entry of an image's root file system.
type File struct {
	// Path is the absolute path in the image.
	Path string
	// Mode holds the permission bits, fs.ModeDir for a directory and
	// fs.ModeSticky where wanted.
	Mode fs.FileMode
	// UID and GID own the entry (0 unless said).
	UID, GID int
	// Data is a regular file's content.
	Data []byte
}

// RootFS returns the root file system of bin's image: bin's binary (read
// from binaryPath) in BinDir, /etc/passwd and /etc/group with the root and
// nonroot users, the CA bundle read from caBundle (the build host's: every
// binary may dial NATS, etcd, OTLP, Redis, MongoDB or an upstream over
// TLS), a world-writable /tmp, the nonroot user's home, and each of libs
// (host paths, symlinks followed) at the same path in the image.
func RootFS(bin Binary, binaryPath, caBundle string, libs []string) ([]File, error) {
	files := []File{
		{Path: "/tmp", Mode: fs.ModeDir | fs.ModeSticky | 0o777},
		{Path: "/home/nonroot", Mode: fs.ModeDir | 0o755, UID: NonRoot, GID: NonRoot},
	}
	for _, name := range []string{"passwd", "group"} {
		data, err := etcFiles.ReadFile("rootfs/etc/" + name)
		if err != nil {
			return nil, fmt.Errorf("root file system: %w", err)
		}
		files = append(files, File{Path: "/etc/" + name, Mode: 0o644, Data: data})
	}
	add := func(hostPath, imagePath string, mode fs.FileMode) error {
		data, err := os.ReadFile(hostPath)
		if err != nil {
			return fmt.Errorf("root file system of %s: %w", bin.Name, err)
		}
		files = append(files, File{Path: imagePath, Mode: mode, Data: data})
		return nil
	}
	if err := add(binaryPath, path.Join(BinDir, bin.Name), 0o755); err != nil {
		return nil, err
	}
	if err := add(caBundle, CABundle, 0o644); err != nil {
		return nil, err
	}
	for _, lib := range libs {
		st, err := os.Stat(lib)
		if err != nil {
			return nil, fmt.Errorf("root file system of %s: %w", bin.Name, err)
		}
		if err := add(lib, lib, st.Mode().Perm()); err != nil {
			return nil, err
		}
	}
	return files, nil
}

// WriteTar writes files as a tar stream that depends on nothing but their
// paths, modes, owners and contents: entries sorted by path, each missing
// parent directory added (0755, root), every time mtime, no user or group
// names.
func WriteTar(w io.Writer, files []File, mtime time.Time) error {
	entries, err := withParents(files)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(w)
	mtime = mtime.UTC().Truncate(time.Second)
	for _, f := range entries {
		hdr := &tar.Header{
			Name:    strings.TrimPrefix(f.Path, "/"),
			Mode:    int64(f.Mode.Perm()),
			Uid:     f.UID,
			Gid:     f.GID,
			ModTime: mtime,
		}
		if f.Mode&fs.ModeSticky != 0 {
			hdr.Mode |= 0o1000
		}
		if f.Mode.IsDir() {
			hdr.Typeflag, hdr.Name = tar.TypeDir, hdr.Name+"/"
		} else {
			hdr.Typeflag, hdr.Size = tar.TypeReg, int64(len(f.Data))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("tar %s: %w", f.Path, err)
		}
		if _, err := tw.Write(f.Data); err != nil {
			return fmt.Errorf("tar %s: %w", f.Path, err)
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("tar: %w", err)
	}
	return nil
}

// withParents returns files and their missing parent directories, sorted
// by path; a path given twice, relative or with a directory as a file's
// parent is an error.
func withParents(files []File) ([]File, error) {
	byPath := map[string]File{}
	for _, f := range files {
		if !path.IsAbs(f.Path) || path.Clean(f.Path) != f.Path || f.Path == "/" {
			return nil, fmt.Errorf("root file system: bad path %q", f.Path)
		}
		if _, dup := byPath[f.Path]; dup {
			return nil, fmt.Errorf("root file system: %s given twice", f.Path)
		}
		byPath[f.Path] = f
	}
	for _, f := range files {
		for dir := path.Dir(f.Path); dir != "/"; dir = path.Dir(dir) {
			p, ok := byPath[dir]
			if ok && !p.Mode.IsDir() {
				return nil, fmt.Errorf("root file system: %s is a file and the parent of %s", dir, f.Path)
			}
			if !ok {
				byPath[dir] = File{Path: dir, Mode: fs.ModeDir | 0o755}
			}
		}
	}
	out := make([]File, 0, len(byPath))
	for _, f := range byPath {
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b File) int { return strings.Compare(a.Path, b.Path) })
	return out, nil
}
