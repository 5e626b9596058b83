package cli

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/hermod/hermod/libs/telemetry"
)

// buildInfo is version's JSON and YAML: hermodctl's build.
type buildInfo struct {
	Name string `json:"name"`
	// Version is the module version, "(devel)" for a workspace build.
	Version string `json:"version"`
	// Commit and Time are the VCS revision and its time, "unknown" when
	// the build did not stamp them; Modified says whether the tree had
	// changes.
	Commit   string `json:"commit"`
	Time     string `json:"time"`
	Modified bool   `json:"modified"`
	// Go is the toolchain that built hermodctl.
	Go string `json:"go"`
}

// isVersion reports whether word asks for the version.
func isVersion(word string) bool {
	return word == "version" || word == "--version" || word == "-version"
}

func version(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("hermodctl version", flag.ContinueOnError)
	fs.SetOutput(stderr)
	output := registerOutput(fs, formatTable, readFormats, tableAliases,
		"output `format`: table (one line; text is the same), json or yaml\n"+
			"(name, version, commit, time, modified, go)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: hermodctl version [-o table|json|yaml]\n\n"+
			"Prints hermodctl's version, the commit it was built from, and the Go toolchain.\n\n")
		fs.PrintDefaults()
	}
	rest, ok, code := parseLocal(fs, args, stderr)
	if !ok {
		return code
	}
	if len(rest) > 0 {
		fs.Usage()
		return ExitUsage
	}
	b := telemetry.BuildInfo()
	var err error
	if output.structured() {
		err = writeStructured(stdout, output.format, buildInfo{Name: "hermodctl", Version: b.Version, Commit: b.Commit, Time: b.Time, Modified: b.Modified, Go: b.Go}, false)
	} else {
		_, err = fmt.Fprintf(stdout, "hermodctl %s\n", b)
	}
	if err != nil {
		fmt.Fprintf(stderr, "hermodctl version: %v\n", err)
		return ExitFailure
	}
	return ExitOK
}
