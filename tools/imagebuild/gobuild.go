package imagebuild

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
)

// StampPackage holds the link-time version stamps the binaries print for
// --version (libs/telemetry's stampVersion, stampCommit, stampTime and
// stampModified).
const StampPackage = "github.com/hermod/hermod/libs/telemetry"

// LDFlags are the linker flags of a release build of src: no symbol
// table or DWARF (-s -w), no build id (it hashes the build's inputs,
// which include the toolchain's paths), and the version stamps.
func LDFlags(src Source) []string {
	return ldflags(src.Version, src.Commit, src.Time.UTC().Format(timeFormat), src.Modified)
}

// ldflags are LDFlags from the stamps' text (the Containerfiles pass
// shell variables).
func ldflags(version, commit, time string, modified bool) []string {
	ld := []string{
		"-s", "-w", "-buildid=",
		"-X", StampPackage + ".stampVersion=" + version,
		"-X", StampPackage + ".stampCommit=" + commit,
		"-X", StampPackage + ".stampTime=" + time,
	}
	if modified {
		ld = append(ld, "-X", StampPackage+".stampModified=true")
	}
	return ld
}

// timeFormat is how the commit time is written (labels, stamps).
const timeFormat = "2006-01-02T15:04:05Z07:00"

// BuildFlags are go build's flags for a release build of src: no file
// system paths in the binary (-trimpath), no VCS stamp from the toolchain
// (-buildvcs=false: the ldflags stamp the same fields whether or not the
// build sees .git, as in a container build), and LDFlags.
func BuildFlags(src Source) []string {
	return []string{"-trimpath", "-buildvcs=false", "-ldflags=" + strings.Join(LDFlags(src), " ")}
}

// GoBuild builds binaries of the repository at root into dir (dir/<name>),
// the static ones with CGO_ENABLED=0 and the ZMQ users with CGO_ENABLED=1,
// one go build per kind. goTool is the go command; the build's output goes
// to log.
func GoBuild(ctx context.Context, goTool, root, dir string, bins []Binary, src Source, log io.Writer) error {
	if strings.ContainsAny(src.Version+src.Commit, " \t\n'\"") {
		return fmt.Errorf("go build: version %q or commit %q holds a space or quote", src.Version, src.Commit)
	}
	for _, cgo := range []bool{false, true} {
		var pkgs []string
		for _, b := range bins {
			if b.Cgo == cgo {
				pkgs = append(pkgs, b.Package)
			}
		}
		if len(pkgs) == 0 {
			continue
		}
		args := append([]string{"build"}, BuildFlags(src)...)
		args = append(args, "-o", dir+string(os.PathSeparator))
		args = append(args, pkgs...)
		cmd := exec.CommandContext(ctx, goTool, args...)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED="+map[bool]string{false: "0", true: "1"}[cgo])
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("go build %s (cgo %t): %w", strings.Join(pkgs, " "), cgo, err)
		}
	}
	return nil
}
