package telemetry

import (
	"fmt"
	"runtime/debug"
)

// Build is what a binary knows of its own build.
type Build struct {
	// Version is the module version ("(devel)" for a workspace build),
	// Commit and Time the VCS revision and its time ("unknown" when the
	// build did not stamp them), Modified whether the tree had changes.
	Version, Commit, Time string
	Modified              bool
	// Go is the toolchain that built it.
	Go string
}

// BuildInfo returns the running binary's build information.
func BuildInfo() Build {
	b := Build{Version: "unknown", Commit: "unknown", Time: "unknown", Go: "unknown"}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	b.Go = bi.GoVersion
	if bi.Main.Version != "" {
		b.Version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Commit = s.Value
		case "vcs.time":
			b.Time = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		}
	}
	return b
}

// String is the version line a binary prints for --version.
func (b Build) String() string {
	commit := b.Commit
	if len(commit) > 12 {
		commit = commit[:12]
	}
	if b.Modified {
		commit += "+changes"
	}
	return fmt.Sprintf("%s (commit %s, %s, %s)", b.Version, commit, b.Time, b.Go)
}
