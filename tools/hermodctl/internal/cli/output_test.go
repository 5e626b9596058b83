package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// decodeAll parses out, JSON or YAML in format: one document or a stream
// of them. It fails the test when out does not parse or is empty.
func decodeAll(t *testing.T, format, out string) []any {
	t.Helper()
	var docs []any
	for dec := newDecoder(format, out); ; {
		var v any
		err := dec(&v)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("-o %s does not parse: %v\n%s", format, err, out)
		}
		docs = append(docs, v)
	}
	if len(docs) == 0 {
		t.Fatalf("-o %s: no document in %q", format, out)
	}
	return docs
}

func newDecoder(format, out string) func(any) error {
	if format == formatJSON {
		return json.NewDecoder(strings.NewReader(out)).Decode
	}
	return yaml.NewDecoder(strings.NewReader(out)).Decode
}

// decodeOne parses out as exactly one document.
func decodeOne(t *testing.T, format, out string) any {
	t.Helper()
	docs := decodeAll(t, format, out)
	if len(docs) != 1 {
		t.Fatalf("-o %s: %d documents, want 1:\n%s", format, len(docs), out)
	}
	return docs[0]
}

// field returns the value at path (keys and list indexes, dot-separated)
// in a decoded document, as fmt.Sprint prints it; "<missing>" when there
// is none.
func field(v any, path string) string {
	for _, k := range strings.Split(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = x[k]; !ok {
				return "<missing>"
			}
		case []any:
			i, err := strconv.Atoi(k)
			if err != nil || i < 0 || i >= len(x) {
				return "<missing>"
			}
			v = x[i]
		default:
			return "<missing>"
		}
	}
	switch x := v.(type) {
	case []any:
		return "len " + strconv.Itoa(len(x))
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	return fmt.Sprint(v)
}

// checkFields fails the test for each path of want whose value differs.
func checkFields(t *testing.T, what string, doc any, want map[string]string) {
	t.Helper()
	for path, w := range want {
		if got := field(doc, path); got != w {
			t.Errorf("%s: %s = %q, want %q", what, path, got, w)
		}
	}
}

func TestOutputFlag(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		def     string
		formats []string
		aliases map[string]string
		want    string   // the format, or "error"
		rest    []string // the arguments left
	}{
		{args: nil, def: formatTable, formats: readFormats, want: formatTable},
		{args: []string{"-o", "json"}, def: formatTable, formats: readFormats, want: formatJSON},
		{args: []string{"--output", "yaml"}, def: formatTable, formats: readFormats, want: formatYAML},
		{args: []string{"--output=json"}, def: formatTable, formats: readFormats, want: formatJSON},
		{args: []string{"-o=yaml"}, def: formatTable, formats: readFormats, want: formatYAML},
		{args: []string{"-ojson"}, def: formatTable, formats: readFormats, want: formatJSON},
		{args: []string{"-o", "text"}, def: formatTable, formats: readFormats, aliases: tableAliases, want: formatTable},
		{args: []string{"-o", "table"}, def: formatRaw, formats: configGetFormats, aliases: configGetAliases, want: formatRaw},
		{args: []string{"-o", "text"}, def: formatTable, formats: readFormats, want: "error"},
		{args: []string{"-o", "xml"}, def: formatTable, formats: readFormats, want: "error"},
		{args: []string{"-o", "none"}, def: formatTable, formats: readFormats, want: "error"},
		{args: []string{"-o", "none"}, def: formatYAML, formats: validateFormats, want: formatNone},
		{args: []string{"-o"}, def: formatTable, formats: readFormats, want: "error"},
		{args: nil, def: "", formats: readFormats, want: ""},
		// Flags and arguments in any order, as kubectl takes them.
		{args: []string{"NAME", "-o", "json"}, def: formatTable, formats: readFormats, want: formatJSON, rest: []string{"NAME"}},
		{args: []string{"A", "-ojson", "B"}, def: formatTable, formats: readFormats, want: formatJSON, rest: []string{"A", "B"}},
		{args: []string{"-o", "yaml", "--", "-o", "json"}, def: formatTable, formats: readFormats, want: formatYAML, rest: []string{"-o", "json"}},
	} {
		name := strings.Join(tc.args, " ")
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		o := registerOutput(fs, tc.def, tc.formats, tc.aliases, "output `format`")
		rest, err := parseFlags(fs, tc.args)
		if tc.want == "error" {
			if err == nil {
				t.Errorf("%q: no error, format %q", name, o.format)
			}
			continue
		}
		if err != nil || o.format != tc.want || strings.Join(rest, " ") != strings.Join(tc.rest, " ") {
			t.Errorf("%q: format %q, args %q, %v; want %q, %q", name, o.format, rest, err, tc.want, tc.rest)
		}
	}
}

// HERMOD_OUTPUT sets the format unless the command line gives -o or
// --output.
func TestOutputFromTheEnvironment(t *testing.T) {
	t.Setenv("HERMOD_OUTPUT", "yaml")
	for args, want := range map[string]string{"": formatYAML, "-o json": formatJSON, "--output json": formatJSON, "-o text": formatTable} {
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		o := registerOutput(fs, formatTable, readFormats, tableAliases, "output `format`")
		if _, ok, code := parseLocal(fs, strings.Fields(args), io.Discard); !ok || o.format != want {
			t.Errorf("%q with HERMOD_OUTPUT=yaml: %q (ok %v, code %d), want %q", args, o.format, ok, code, want)
		}
	}
	t.Setenv("HERMOD_OUTPUT", "xml")
	var errb bytes.Buffer
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	registerOutput(fs, formatTable, readFormats, tableAliases, "output `format`")
	if _, ok, code := parseLocal(fs, nil, &errb); ok || code != ExitUsage || !strings.Contains(errb.String(), "HERMOD_OUTPUT") {
		t.Errorf("HERMOD_OUTPUT=xml: ok %v, code %d, %q", ok, code, errb.String())
	}
}

// The names of the read commands, with a valid argument list for those
// that need one, from the command table.
func readCommandArgs() [][]string {
	var out [][]string
	for _, c := range outputCommands() {
		args := strings.Fields(c.name)
		if c.name == "config validate" || c.name == "config convert" {
			args = append(args, "file.yaml")
		}
		out = append(out, args)
	}
	return out
}

// Every read command refuses an -o it does not take as a usage error
// (exit 2) that names the formats it takes, before it connects anywhere.
func TestInvalidOutputIsAUsageError(t *testing.T) {
	cmds := readCommandArgs()
	if len(cmds) != 9 {
		t.Errorf("%d read commands, want 9: %v", len(cmds), cmds)
	}
	for _, args := range cmds {
		for _, bad := range [][]string{{"-o", "xml"}, {"--output", "xml"}, {"-oxml"}} {
			_, errs, code := run(append(args, bad...)...)
			if code != ExitUsage || !strings.Contains(errs, `unknown output format "xml": want `) || !strings.Contains(errs, "json") {
				t.Errorf("%v %v: code %d, stderr %q", args, bad, code, errs)
			}
		}
	}
}

// The command table says which commands take -o: their help shows -o and
// --output, the other commands' help shows neither.
func TestCommandTableMatchesTheFlags(t *testing.T) {
	for g, verbs := range groups {
		for v, c := range verbs {
			_, errs, code := run(g, v, "-h")
			has := strings.Contains(errs, "  -o format") && strings.Contains(errs, "  -output format")
			if code != ExitOK || has != (c.output != nil) {
				t.Errorf("%s %s -h: code %d, has -o %v, table says %v", g, v, code, has, c.output)
			}
			for _, f := range c.output {
				if !strings.Contains(errs, f) {
					t.Errorf("%s %s -h does not name format %s", g, v, f)
				}
			}
		}
	}
}

func TestVersionOutputs(t *testing.T) {
	out, errs, code := run("version")
	if code != ExitOK || !strings.HasPrefix(out, "hermodctl ") || strings.Count(out, "\n") != 1 {
		t.Errorf("version: %d %q %q", code, out, errs)
	}
	if same, _, _ := run("version", "-o", "table"); same != out {
		t.Errorf("version -o table: %q, want %q", same, out)
	}
	for _, args := range [][]string{{"version", "-o"}, {"--version", "--output"}, {"--pool", "p", "version", "-o"}} {
		for _, format := range []string{formatJSON, formatYAML} {
			out, errs, code := run(append(args, format)...)
			if code != ExitOK {
				t.Fatalf("%v %s: %d %q", args, format, code, errs)
			}
			doc := decodeOne(t, format, out)
			checkFields(t, strings.Join(args, " ")+" "+format, doc, map[string]string{"name": "hermodctl", "modified": "false"})
			for _, k := range []string{"version", "commit", "time", "go"} {
				if v := field(doc, k); v == "<missing>" || v == "" {
					t.Errorf("%v %s: %s is %q", args, format, k, v)
				}
			}
			if !strings.HasPrefix(field(doc, "go"), "go") {
				t.Errorf("%v %s: go %q", args, format, field(doc, "go"))
			}
		}
	}
	if _, _, code := run("version", "extra"); code != ExitUsage {
		t.Errorf("version extra: code %d", code)
	}
}

func TestWriteStructured(t *testing.T) {
	v := map[string]any{"b": 1, "a": []string{"x"}}
	var b bytes.Buffer
	if err := writeStructured(&b, formatJSON, v, false); err != nil || b.String() != "{\n  \"a\": [\n    \"x\"\n  ],\n  \"b\": 1\n}\n" {
		t.Errorf("json: %v %q", err, b.String())
	}
	b.Reset()
	for range 2 {
		if err := writeStructured(&b, formatJSON, json.RawMessage(`{"a": 1,  "b": [1, 2]}`), true); err != nil {
			t.Fatal(err)
		}
	}
	if b.String() != "{\"a\":1,\"b\":[1,2]}\n{\"a\":1,\"b\":[1,2]}\n" {
		t.Errorf("json stream: %q", b.String())
	}
	b.Reset()
	for range 2 {
		if err := writeStructured(&b, formatYAML, v, true); err != nil {
			t.Fatal(err)
		}
	}
	if b.String() != "---\na:\n- x\nb: 1\n---\na:\n- x\nb: 1\n" || len(decodeAll(t, formatYAML, b.String())) != 2 {
		t.Errorf("yaml stream: %q", b.String())
	}
	if err := writeStructured(&b, "xml", v, false); !errors.Is(err, errUnknownFormat) {
		t.Errorf("xml: %v", err)
	}
}
