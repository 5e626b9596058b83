package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"sigs.k8s.io/yaml"
)

// Output formats: the -o (--output) flag of the read commands.
const (
	// formatTable is the human form: a table, or lines of text for the
	// commands that print events or one value.
	formatTable = "table"
	formatJSON  = "json"
	formatYAML  = "yaml"
	// formatRaw is config get's human form: the stored document as it
	// was set, after a comment line with its revision.
	formatRaw = "raw"
	// formatNone is config validate's: only the verdict.
	formatNone = "none"
)

// The formats each read command takes; the command table (completion)
// and the commands' flags share them.
var (
	readFormats      = []string{formatTable, formatJSON, formatYAML}
	configGetFormats = []string{formatRaw, formatJSON, formatYAML}
	convertFormats   = []string{formatYAML, formatJSON}
	validateFormats  = []string{formatYAML, formatJSON, formatNone}
)

// Other names the -o flag accepts for a format: text (audit's name for
// its lines before -o was shared) is table, and config get, whose human
// form is its document, takes table and text for raw.
var (
	tableAliases     = map[string]string{"text": formatTable}
	configGetAliases = map[string]string{formatTable: formatRaw, "text": formatRaw}
)

// errUnknownFormat is the error of an -o value the command does not take.
var errUnknownFormat = errors.New("unknown output format")

// outputFlag is the value of a command's -o and --output flags.
type outputFlag struct {
	// format is the format chosen (an allowed one, aliases resolved); ""
	// when the command chooses (autoscaler get: table for a list, yaml
	// for one object) and none was given.
	format  string
	allowed []string
	aliases map[string]string
}

// String implements flag.Value.
func (o *outputFlag) String() string {
	if o == nil {
		return ""
	}
	return o.format
}

// Set implements flag.Value: v must be an allowed format or an alias of
// one.
func (o *outputFlag) Set(v string) error {
	f := v
	if a, ok := o.aliases[v]; ok {
		f = a
	}
	if !slices.Contains(o.allowed, f) {
		return fmt.Errorf("%w %q: want %s", errUnknownFormat, v, o.names())
	}
	o.format = f
	return nil
}

// names lists the allowed formats, then the aliases.
func (o *outputFlag) names() string {
	s := strings.Join(o.allowed, ", ")
	if len(o.aliases) == 0 {
		return s
	}
	var as []string
	for a, f := range o.aliases {
		as = append(as, a+" = "+f)
	}
	slices.Sort(as)
	return s + " (" + strings.Join(as, ", ") + ")"
}

// structured reports whether the format is json or yaml.
func (o *outputFlag) structured() bool { return o.format == formatJSON || o.format == formatYAML }

// registerOutput declares -o and its long form --output on fs: one of
// formats or an alias of one, def ("" lets the command choose) when
// neither is given. help says what each format prints; "`format`" in it
// names the value in the usage.
func registerOutput(fs *flag.FlagSet, def string, formats []string, aliases map[string]string, help string) *outputFlag {
	o := &outputFlag{format: def, allowed: formats, aliases: aliases}
	fs.Var(o, "o", help)
	fs.Var(o, "output", "long form of -o: the output `format`")
	return o
}

// outputEnv is ApplyEnv's filter for a flag set with -o and --output:
// HERMOD_OUTPUT (or HERMOD_O) sets the format unless the command line
// gave either flag.
func outputEnv(fs *flag.FlagSet) func(name string) bool {
	return func(name string) bool {
		if name != "o" && name != "output" {
			return true
		}
		return !isSet(fs, "o") && !isSet(fs, "output")
	}
}

// parseFlags parses args with flags and arguments in any order, as
// kubectl does (get NAME -o yaml); "--" ends the flags. -oFORMAT is read
// as -o FORMAT. It returns the arguments that are not flags.
func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	args = expandOutput(fs, args)
	var rest []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		left := fs.Args()
		if len(left) == 0 {
			return rest, nil
		}
		if used := len(args) - len(left); used > 0 && args[used-1] == "--" {
			return append(rest, left...), nil
		}
		rest = append(rest, left[0])
		args = left[1:]
	}
}

// expandOutput splits kubectl's -ojson into -o json, when fs has -o and
// no flag of that name.
func expandOutput(fs *flag.FlagSet, args []string) []string {
	if fs.Lookup("o") == nil {
		return args
	}
	out := make([]string, 0, len(args)+1)
	for i, a := range args {
		if a == "--" {
			return append(out, args[i:]...)
		}
		if len(a) > 2 && strings.HasPrefix(a, "-o") && a[2] != '=' && fs.Lookup(a[1:]) == nil {
			out = append(out, "-o", a[2:])
			continue
		}
		out = append(out, a)
	}
	return out
}

// writeStructured writes v (or a JSON document already encoded) as
// indented JSON or, for yaml, as a YAML document; a stream of them (events
// one by one) has one JSON document a line, or YAML documents each after
// a "---" line.
func writeStructured(w io.Writer, format string, v any, stream bool) error {
	var b []byte
	switch doc := v.(type) {
	case []byte:
		b = doc
	case json.RawMessage:
		b = doc
	default:
		var err error
		if b, err = json.Marshal(v); err != nil {
			return fmt.Errorf("encode %s output: %w", format, err)
		}
	}
	switch format {
	case formatYAML:
		y, err := yaml.JSONToYAML(b)
		if err != nil {
			return fmt.Errorf("encode yaml output: %w", err)
		}
		if stream {
			_, _ = io.WriteString(w, "---\n")
		}
		_, err = w.Write(y)
		return err
	case formatJSON:
		var buf bytes.Buffer
		if stream {
			err := json.Compact(&buf, b)
			buf.WriteByte('\n')
			if err != nil {
				return fmt.Errorf("encode json output: %w", err)
			}
		} else if err := json.Indent(&buf, b, "", "  "); err != nil {
			return fmt.Errorf("encode json output: %w", err)
		} else {
			buf.WriteByte('\n')
		}
		_, err := w.Write(buf.Bytes())
		return err
	}
	return fmt.Errorf("%w %q", errUnknownFormat, format)
}

// protoJSON encodes m as compact JSON with the proto field names, as the
// structured outputs show events and registry entries.
func protoJSON(m proto.Message) (json.RawMessage, error) {
	b, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", m.ProtoReflect().Descriptor().Name(), err)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return nil, fmt.Errorf("encode %s: %w", m.ProtoReflect().Descriptor().Name(), err)
	}
	return buf.Bytes(), nil
}

// kubeList is kubectl's shape of a list of objects in JSON and YAML.
type kubeList struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Items      []json.RawMessage `json:"items"`
}

func newKubeList(items []json.RawMessage) kubeList {
	if items == nil {
		items = []json.RawMessage{}
	}
	return kubeList{APIVersion: "v1", Kind: "List", Items: items}
}
