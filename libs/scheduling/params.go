package scheduling

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"
)

// ParamError is an invalid plugin parameter, with its path under the
// plugin ("parameters.deciders.prefill").
type ParamError struct {
	Path string
	Msg  string
}

func (e *ParamError) Error() string { return e.Path + ": " + e.Msg }

// ParamErrorf returns a ParamError for field (a path below "parameters").
func ParamErrorf(field, format string, args ...any) error {
	return &ParamError{Path: "parameters." + field, Msg: fmt.Sprintf(format, args...)}
}

// DecodeParameters decodes a plugin's raw JSON parameters into dst, a
// pointer to the plugin's parameter struct already holding its defaults.
// Fields are matched by their json tag (exactly, else case-insensitively as
// encoding/json does); null leaves a default in place. Type errors come back
// as a *ParamError naming the field. A key within two edits of a known one
// ("treshold") is a typo and an error. Other keys the struct does not know
// are not errors, so configs written for other endpoint pickers still load:
// each is reported through h.Warn. h may be nil.
func DecodeParameters(raw json.RawMessage, dst any, h Handle) error {
	v := reflect.ValueOf(dst)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return fmt.Errorf("DecodeParameters: dst must be a non-nil pointer, got %T", dst)
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return nil
	}
	var unknown []string
	if err := decodeValue("parameters", raw, v.Elem(), &unknown); err != nil {
		return err
	}
	if h != nil {
		for _, p := range unknown {
			h.Warn(p + ": unknown parameter, ignored")
		}
	}
	return nil
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

func decodeValue(path string, raw json.RawMessage, v reflect.Value, unknown *[]string) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil
	}
	if v.CanAddr() && v.Addr().Type().Implements(unmarshalerType) {
		if err := v.Addr().Interface().(json.Unmarshaler).UnmarshalJSON(raw); err != nil {
			var pe *ParamError
			if errors.As(err, &pe) {
				return &ParamError{Path: path + strings.TrimPrefix(pe.Path, "parameters"), Msg: pe.Msg}
			}
			return &ParamError{Path: path, Msg: err.Error()}
		}
		return nil
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		return decodeValue(path, raw, v.Elem(), unknown)
	case reflect.Struct:
		var m map[string]json.RawMessage
		if raw[0] != '{' || json.Unmarshal(raw, &m) != nil {
			return &ParamError{Path: path, Msg: "must be an object"}
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		fields := jsonFields(v.Type())
		setBy := make(map[string]string, len(keys))
		for _, k := range keys {
			f, ok := fields.lookup(k)
			if !ok {
				if near := fields.nearest(k); near != "" {
					return &ParamError{Path: path + "." + k, Msg: fmt.Sprintf("unknown parameter; did you mean %q?", near)}
				}
				*unknown = append(*unknown, path+"."+k)
				continue
			}
			if other, dup := setBy[f.name]; dup {
				return &ParamError{Path: path + "." + f.name, Msg: fmt.Sprintf("set twice, as %q and %q", other, k)}
			}
			setBy[f.name] = k
			if err := decodeValue(path+"."+k, m[k], v.FieldByIndex(f.index), unknown); err != nil {
				return err
			}
		}
		return nil
	case reflect.Map:
		if v.Type().Key().Kind() != reflect.String {
			break
		}
		var m map[string]json.RawMessage
		if raw[0] != '{' || json.Unmarshal(raw, &m) != nil {
			return &ParamError{Path: path, Msg: "must be an object"}
		}
		out := reflect.MakeMapWithSize(v.Type(), len(m))
		for k, r := range m {
			elem := reflect.New(v.Type().Elem()).Elem()
			if err := decodeValue(path+"."+k, r, elem, unknown); err != nil {
				return err
			}
			out.SetMapIndex(reflect.ValueOf(k).Convert(v.Type().Key()), elem)
		}
		v.Set(out)
		return nil
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			break
		}
		var items []json.RawMessage
		if raw[0] != '[' || json.Unmarshal(raw, &items) != nil {
			return &ParamError{Path: path, Msg: "must be a list"}
		}
		out := reflect.MakeSlice(v.Type(), len(items), len(items))
		for i, r := range items {
			if err := decodeValue(fmt.Sprintf("%s[%d]", path, i), r, out.Index(i), unknown); err != nil {
				return err
			}
		}
		v.Set(out)
		return nil
	}
	if err := json.Unmarshal(raw, v.Addr().Interface()); err != nil {
		return &ParamError{Path: path, Msg: "must be " + kindWord(v.Type()) + " (got " + shortJSON(raw) + ")"}
	}
	return nil
}

type jsonField struct {
	name  string
	index []int
}

// structFields are a struct's exported fields by JSON name, in declaration
// order.
type structFields []jsonField

// jsonFields lists the JSON names of a struct's exported fields, descending
// into embedded structs.
func jsonFields(t reflect.Type) structFields {
	var out structFields
	for _, f := range reflect.VisibleFields(t) {
		if !f.IsExported() || (f.Anonymous && f.Type.Kind() == reflect.Struct && f.Tag.Get("json") == "") {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, jsonField{name: name, index: f.Index})
	}
	return out
}

// lookup finds the field a key sets: the exact name, else the first field
// (in declaration order) whose name equals it case-insensitively.
func (fs structFields) lookup(key string) (jsonField, bool) {
	for _, f := range fs {
		if f.name == key {
			return f, true
		}
	}
	for _, f := range fs {
		if strings.EqualFold(f.name, key) {
			return f, true
		}
	}
	return jsonField{}, false
}

// nearest returns the field name within two edits of key, if key is long
// enough for that to mean a typo rather than another word.
func (fs structFields) nearest(key string) string {
	if len(key) < 5 {
		return ""
	}
	best, bestDist := "", 3
	for _, f := range fs {
		if d := editDistance(strings.ToLower(key), strings.ToLower(f.name)); d < bestDist {
			best, bestDist = f.name, d
		}
	}
	return best
}

func kindWord(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a non-negative integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "a " + t.String()
}

func shortJSON(raw json.RawMessage) string {
	s := string(raw)
	if len(s) > 40 {
		s = s[:37] + "..."
	}
	return s
}

// Duration is a Go duration string parameter ("2m", "500ms").
type Duration time.Duration

// UnmarshalJSON accepts a duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf(`must be a duration string such as "2m" or "500ms" (got %s)`, shortJSON(b))
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf(`must be a duration such as "2m" or "500ms" (got %q)`, s)
	}
	*d = Duration(v)
	return nil
}

// MarshalJSON writes the duration string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// String formats the duration as time.Duration does ("2m0s").
func (d Duration) String() string { return time.Duration(d).String() }

// Std returns the time.Duration.
func (d Duration) Std() time.Duration { return time.Duration(d) }

// Uint64 is a non-negative integer parameter that upstream configurations
// may also write as a string of one (hashSeed: "42").
type Uint64 uint64

// UnmarshalJSON accepts an integer or a string holding one ("" is 0).
func (u *Uint64) UnmarshalJSON(b []byte) error {
	s := string(b)
	if len(b) > 0 && b[0] == '"' {
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		if strings.TrimSpace(s) == "" {
			*u = 0
			return nil
		}
	}
	v, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return fmt.Errorf("must be a non-negative integer, or a string of one (got %s)", shortJSON(b))
	}
	*u = Uint64(v)
	return nil
}
