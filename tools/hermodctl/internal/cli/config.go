package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/hermod/hermod/libs/plugins/standard"
	"github.com/hermod/hermod/libs/scheduling"
)

func configValidate(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("hermodctl config validate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	output := registerOutput(fs, formatYAML, validateFormats, nil, "output `format` of the resolved config: yaml, json or none")
	strict := fs.Bool("strict", false, "treat warnings (unknown parameters, skipped plugins, deprecations) as errors")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: hermodctl config validate [-o yaml|json|none] [-strict] FILE...\n\n"+
			"Checks each EndpointPickerConfig (or Helm values file with a config: key) and prints\n"+
			"it resolved: defaults applied, plugins in order, profiles with weights, warnings.\n"+
			"Each file's verdict is a comment line (# FILE: valid) before its resolved config.\n"+
			"Exits 1 if any file is invalid.\n\n")
		fs.PrintDefaults()
	}
	files, ok, code := parseLocal(fs, args, stderr)
	if !ok {
		return code
	}
	if len(files) == 0 {
		fs.Usage()
		return ExitUsage
	}
	code = ExitOK
	for _, path := range files {
		resolved, err := validateFile(path)
		if err == nil && *strict && len(resolved.Warnings) > 0 {
			err = fmt.Errorf("warnings are errors with -strict:\n%s", strings.Join(resolved.Warnings, "\n"))
		}
		if err != nil {
			fmt.Fprintf(stderr, "%s: invalid\n%s\n", path, indent(err.Error()))
			code = ExitFailure
			continue
		}
		fmt.Fprintf(stdout, "# %s: valid", path)
		if n := len(resolved.Warnings); n > 0 {
			fmt.Fprintf(stdout, " (%d warning%s)", n, plural(n))
		}
		fmt.Fprintln(stdout)
		if err := printResolved(stdout, resolved, output.format); err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", path, err)
			return ExitFailure
		}
	}
	return code
}

func validateFile(path string) (*scheduling.Resolved, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return validateConfig(data)
}

// validateConfig parses and builds a config; the result lists its
// warnings.
func validateConfig(data []byte) (*scheduling.Resolved, error) {
	s, err := buildConfig(data)
	if err != nil {
		return nil, err
	}
	defer func() { _ = s.Close() }()
	return s.Describe(), nil
}

// buildConfig parses a config and builds its scheduler as a picker would
// (without the picker's services); the caller closes it.
func buildConfig(data []byte) (*scheduling.Scheduler, error) {
	cfg, err := scheduling.ParseConfig(data)
	if err != nil {
		return nil, err
	}
	// Warnings are part of the output; do not also log them.
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	return scheduling.New(cfg, append(standard.ValidationOptions(), scheduling.WithLogger(quiet))...)
}

func printResolved(w io.Writer, r *scheduling.Resolved, format string) error {
	if format == "none" {
		return nil
	}
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encode resolved config: %w", err)
	}
	if format == "json" {
		_, err = fmt.Fprintf(w, "%s\n", js)
		return err
	}
	// JSON is YAML: parsing it into nodes keeps the field order; dropping
	// the flow and quoting styles prints it as block YAML.
	var doc yaml.Node
	if err := yaml.Unmarshal(js, &doc); err != nil {
		return fmt.Errorf("encode resolved config: %w", err)
	}
	blockStyle(&doc)
	return writeYAML(w, &doc)
}

func blockStyle(n *yaml.Node) {
	n.Style = 0
	for _, c := range n.Content {
		blockStyle(c)
	}
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(s, "\n", "\n  ")
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
