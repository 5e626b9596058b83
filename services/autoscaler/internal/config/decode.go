package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/hermod/hermod/libs/yamlstream"
)

// toJSON converts one YAML or JSON document into JSON and its generic tree
// (maps, slices, strings, json.Number, bools and nil). A document whose
// first character is '{' or '[' and that is valid JSON is read as JSON
// (YAML 1.1 parsers reject some JSON escapes); anything else as YAML, with
// duplicate keys rejected. firstLine is the document's first line in the
// stream, used to make YAML error line numbers refer to the stream.
func toJSON(doc []byte, firstLine int) ([]byte, any, error) {
	trimmed := bytes.TrimSpace(doc)
	var js []byte
	if len(trimmed) > 0 && (trimmed[0] == '{' || trimmed[0] == '[') && json.Valid(trimmed) {
		if err := checkJSONDuplicates(trimmed); err != nil {
			return nil, nil, err
		}
		js = trimmed
	} else {
		var err error
		js, err = yaml.YAMLToJSONStrict(doc)
		if err != nil {
			return nil, nil, yamlError(err, firstLine)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	var tree any
	if err := dec.Decode(&tree); err != nil {
		return nil, nil, fmt.Errorf("invalid document: %w", err)
	}
	return js, tree, nil
}

// yamlError rewrites a YAML conversion error: line numbers are shifted to
// count from the start of the stream, and JSON's refusal of infinities
// and NaN is explained.
func yamlError(err error, firstLine int) error {
	msg := err.Error()
	if strings.Contains(msg, "json: unsupported value") {
		return errors.New("invalid YAML: .inf and .nan are not allowed")
	}
	msg = yamlstream.ShiftLines(msg, firstLine)
	msg = strings.TrimPrefix(msg, "yaml: ")
	return errors.New("invalid YAML: " + strings.ReplaceAll(msg, "\n", " "))
}

// checkJSONDuplicates rejects a JSON text with a key repeated in one
// object (encoding/json silently keeps the last one).
func checkJSONDuplicates(js []byte) error {
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	// frame is an open object (keys != nil) or array.
	type frame struct {
		keys    map[string]bool
		wantKey bool
	}
	var stack []*frame
	valueDone := func() {
		if n := len(stack); n > 0 && stack[n-1].keys != nil {
			stack[n-1].wantKey = true
		}
	}
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("invalid JSON: %w", err)
		}
		if n := len(stack); n > 0 && stack[n-1].keys != nil && stack[n-1].wantKey {
			top := stack[n-1]
			if tok == json.Delim('}') {
				stack = stack[:n-1]
				valueDone()
				continue
			}
			key, _ := tok.(string)
			if top.keys[key] {
				return fmt.Errorf("invalid JSON: key %q repeated in an object", key)
			}
			top.keys[key] = true
			top.wantKey = false
			continue
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{keys: map[string]bool{}, wantKey: true})
		case json.Delim('['):
			stack = append(stack, &frame{})
		case json.Delim(']'):
			stack = stack[:len(stack)-1]
			valueDone()
		default:
			valueDone()
		}
	}
}

// jsonFieldsOf maps the JSON names of t's fields to their types.
func jsonFieldsOf(t reflect.Type) map[string]reflect.Type {
	out := make(map[string]reflect.Type, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

var timeType = reflect.TypeFor[time.Time]()

// checkShape checks a generic JSON tree against the Go type it is decoded
// into: unknown fields (matched exactly, unlike encoding/json), wrong
// types, integers out of range and malformed timestamps are problems named
// by path. A tree that passes decodes into t with encoding/json without
// error. null is accepted everywhere (the field stays unset).
func checkShape(v any, t reflect.Type, path string, p *problems) {
	if v == nil {
		return
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == timeType {
		s, ok := v.(string)
		if !ok {
			p.addf(path, "must be an RFC 3339 timestamp string, got %s", describe(v))
			return
		}
		if _, err := time.Parse(time.RFC3339, s); err != nil {
			p.addf(path, "must be an RFC 3339 timestamp like 2025-01-02T15:04:05Z, got %q", s)
		}
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			p.addf(path, "must be a mapping, got %s", describe(v))
			return
		}
		fields := jsonFieldsOf(t)
		for _, k := range sortedKeys(m) {
			ft, ok := fields[k]
			if !ok {
				p.addf(joinPath(path, k), "unknown field")
				continue
			}
			checkShape(m[k], ft, joinPath(path, k), p)
		}
	case reflect.Map:
		m, ok := v.(map[string]any)
		if !ok {
			p.addf(path, "must be a mapping, got %s", describe(v))
			return
		}
		for _, k := range sortedKeys(m) {
			checkShape(m[k], t.Elem(), joinPath(path, k), p)
		}
	case reflect.Slice:
		s, ok := v.([]any)
		if !ok {
			p.addf(path, "must be a sequence, got %s", describe(v))
			return
		}
		for i, e := range s {
			checkShape(e, t.Elem(), indexPath(path, i), p)
		}
	case reflect.String:
		if _, ok := v.(string); !ok {
			p.addf(path, "must be a string, got %s (quote it)", describe(v))
		}
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			p.addf(path, "must be a boolean (true or false), got %s", describe(v))
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, ok := v.(json.Number)
		if !ok {
			p.addf(path, "must be an integer, got %s", describe(v))
			return
		}
		if _, err := strconv.ParseInt(string(n), 10, t.Bits()); err != nil {
			if f, ferr := strconv.ParseFloat(string(n), 64); ferr == nil && f == math.Trunc(f) {
				p.addf(path, "integer out of range, got %s", n)
			} else {
				p.addf(path, "must be an integer, got %s", n)
			}
		}
	case reflect.Float32, reflect.Float64:
		n, ok := v.(json.Number)
		if !ok {
			p.addf(path, "must be a number, got %s", describe(v))
			return
		}
		f, err := strconv.ParseFloat(string(n), t.Bits())
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			p.addf(path, "number out of range, got %s", n)
		}
	default:
		p.addf(path, "unsupported field type %s", t)
	}
}

// describe names the kind of a generic JSON value for error messages.
func describe(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "a mapping"
	case []any:
		return "a sequence"
	case string:
		return fmt.Sprintf("string %q", truncate(v))
	case json.Number:
		return "number " + truncate(string(v))
	case bool:
		return "boolean " + strconv.FormatBool(v)
	default:
		return fmt.Sprintf("%T", v)
	}
}

func truncate(s string) string {
	const maxLen = 64
	if len(s) <= maxLen {
		return s
	}
	return s[:maxLen] + "..."
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// decodeStrict checks tree against out's type and, when it fits, decodes
// js into out. Problems are reported under prefix.
func decodeStrict(js []byte, tree any, out any, prefix string, p *problems) bool {
	before := len(*p)
	checkShape(tree, reflect.TypeOf(out), prefix, p)
	if len(*p) > before {
		return false
	}
	if err := json.Unmarshal(js, out); err != nil {
		// checkShape accepts only what decodes; keep a message anyway.
		p.addf(prefix, "%v", err)
		return false
	}
	return true
}
