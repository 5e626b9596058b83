package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/hermod/hermod/libs/atomicfile"
	"github.com/hermod/hermod/libs/plugins/standard"
	"github.com/hermod/hermod/libs/scheduling"
)

func configValidate(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("hermodctl config validate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	output := registerOutput(fs, formatYAML, validateFormats, nil, "output `format` of the effective config: yaml, json or none")
	strict := fs.Bool("strict", false, "treat warnings (unknown parameters, skipped plugins) and deprecated fields as errors")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: hermodctl config validate [-o yaml|json|none] [-strict] FILE...\n\n"+
			"Checks each EndpointPickerConfig (or Helm values file with a config: key) and prints\n"+
			"the configuration it runs as, in the llm-d.ai/v1alpha1 layout: every plugin with its\n"+
			"effective parameters (those added by default marked), each profile's filters, scorers\n"+
			"with their weights and picker, the parsers. The output loads as it is.\n"+
			"Each file's verdict is a comment line (# FILE: valid) before it, then its warnings\n"+
			"and deprecated fields as comments. Exits 1 if any file is invalid.\n\n")
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
	for i, path := range files {
		resolved, err := validateFile(path)
		if err == nil && *strict && len(resolved.Warnings)+len(resolved.Deprecations) > 0 {
			err = fmt.Errorf("warnings and deprecated fields are errors with -strict:\n%s", strings.Join(append(resolved.Warnings, resolved.Deprecations...), "\n"))
		}
		if err != nil {
			fmt.Fprintf(stderr, "%s: invalid\n%s\n", path, indent(err.Error()))
			code = ExitFailure
			continue
		}
		if i > 0 && output.format == formatYAML {
			fmt.Fprintln(stdout, "---")
		}
		fmt.Fprintf(stdout, "# %s: valid%s\n", path, counts(len(resolved.Warnings), len(resolved.Deprecations)))
		for _, w := range resolved.Warnings {
			fmt.Fprintf(stdout, "# warning: %s\n", w)
		}
		for _, d := range resolved.Deprecations {
			fmt.Fprintf(stdout, "# deprecated: %s\n", d)
		}
		if err := printEffective(stdout, resolved, output.format); err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", path, err)
			return ExitFailure
		}
	}
	return code
}

// counts says " (2 warnings, 1 deprecated field)", or nothing.
func counts(warnings, deprecations int) string {
	var parts []string
	if warnings > 0 {
		parts = append(parts, fmt.Sprintf("%d warning%s", warnings, plural(warnings)))
	}
	if deprecations > 0 {
		parts = append(parts, fmt.Sprintf("%d deprecated field%s", deprecations, plural(deprecations)))
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

func configConvert(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("hermodctl config convert", flag.ContinueOnError)
	fs.SetOutput(stderr)
	output := registerOutput(fs, formatYAML, convertFormats, nil, "output `format`: yaml or json")
	write := fs.Bool("w", false, "write the result back to each FILE instead of printing it (a values file is written as the bare config)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: hermodctl config convert [-o yaml|json] [-w] FILE...\n\n"+
			"Rewrites each EndpointPickerConfig in the llm-d.ai/v1alpha1 layout (llm-d router v0.9+):\n"+
			"apiVersion llm-d.ai/v1alpha1, the top-level parser as requestHandler.parsers, the\n"+
			"top-level saturationDetector as flowControl.saturationDetector (GIE's inline\n"+
			"thresholds as a utilization-detector plugin), data as dataLayer. Nothing else\n"+
			"changes, defaults are not added (config validate shows those), and comments are\n"+
			"not kept. Each change made is printed on stderr. The file must parse; it need not\n"+
			"build (its plugin parameters are not checked).\n\n")
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
	for i, path := range files {
		out, changes, err := convertFile(path, output.format)
		if err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", path, err)
			code = ExitFailure
			continue
		}
		for _, c := range changes {
			fmt.Fprintf(stderr, "%s: %s\n", path, c)
		}
		if *write {
			if err := atomicfile.WriteFile(path, out, 0); err != nil {
				fmt.Fprintf(stderr, "%s: %v\n", path, err)
				code = ExitFailure
			}
			continue
		}
		if i > 0 && output.format == formatYAML {
			fmt.Fprintln(stdout, "---")
		}
		if _, err := stdout.Write(out); err != nil {
			return ExitFailure
		}
	}
	return code
}

// convertFile parses a config file and writes it in the new layout; the
// changes are its deprecated fields.
func convertFile(path, format string) ([]byte, []string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	cfg, err := scheduling.ParseConfig(data)
	if err != nil {
		return nil, nil, err
	}
	changes := cfg.Deprecations
	if cfg.FromValuesFile {
		changes = append(changes, "the config: key of the Helm values file, alone")
	}
	if format == formatJSON {
		js, err := scheduling.DocumentJSON(cfg.Document())
		if err != nil {
			return nil, nil, err
		}
		return append(js, '\n'), changes, nil
	}
	out, err := scheduling.MarshalConfig(cfg)
	return out, changes, err
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

// printEffective prints the effective configuration; in YAML each plugin
// the config did not declare carries a comment saying where it came from.
func printEffective(w io.Writer, r *scheduling.Resolved, format string) error {
	if format == "none" {
		return nil
	}
	doc := r.Effective.Document()
	if format == formatJSON {
		js, err := scheduling.DocumentJSON(doc)
		if err != nil {
			return fmt.Errorf("encode effective config: %w", err)
		}
		_, err = fmt.Fprintf(w, "%s\n", js)
		return err
	}
	annotatePlugins(doc, r.Plugins)
	return writeYAML(w, doc)
}

// annotatePlugins comments each plugin of doc (Document's, whose plugins
// are r.Plugins in order) that the config did not declare, or that is
// skipped.
func annotatePlugins(doc *yaml.Node, plugins []scheduling.ResolvedPlugin) {
	for i := 0; i+1 < len(doc.Content); i += 2 {
		if doc.Content[i].Value != "plugins" {
			continue
		}
		items := doc.Content[i+1].Content
		for j, p := range plugins {
			if j >= len(items) || len(items[j].Content) == 0 {
				return
			}
			var notes []string
			if !strings.HasPrefix(p.Origin, "plugins[") {
				notes = append(notes, p.Origin)
			}
			if p.Skipped != "" {
				notes = append(notes, "skipped: "+p.Skipped)
			}
			if len(notes) == 0 {
				continue
			}
			item := items[j]
			for k := 0; k+1 < len(item.Content); k += 2 {
				if item.Content[k].Value == "type" {
					item.Content[k+1].LineComment = strings.Join(notes, "; ")
				}
			}
		}
	}
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
