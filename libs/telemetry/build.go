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

// Link-time stamps. A release build (make images, the Containerfile) sets
// them with -ldflags "-X github.com/hermod/hermod/libs/telemetry.<name>=..."
// and builds with -buildvcs=false, so that a binary says the same whether
// or not its build saw the .git directory; each one set wins over what
// the Go toolchain recorded in the build information.
var (
	stampVersion  string // e.g. 0.1.0
	stampCommit   string // the full commit hash
	stampTime     string // the commit's time, RFC 3339
	stampModified string // "true" when the tree differed from the commit
)

// BuildInfo returns the running binary's build information.
func BuildInfo() Build {
	b := Build{Version: "unknown", Commit: "unknown", Time: "unknown", Go: "unknown"}
	if bi, ok := debug.ReadBuildInfo(); ok {
		b = fromBuildInfo(b, bi)
	}
	return applyStamps(b, stampVersion, stampCommit, stampTime, stampModified)
}

// fromBuildInfo fills b from what the toolchain recorded.
func fromBuildInfo(b Build, bi *debug.BuildInfo) Build {
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

// applyStamps overrides b's fields with the link-time stamps that are set.
func applyStamps(b Build, version, commit, time, modified string) Build {
	if version != "" {
		b.Version = version
	}
	if commit != "" {
		b.Commit = commit
		b.Modified = modified == "true"
	}
	if time != "" {
		b.Time = time
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
