package config

import (
	"errors"
	"fmt"
	"strings"
)

// FieldError is one problem with one field of one object. Parse and the
// Validate methods return these (joined with errors.Join, and wrapped in a
// DocumentError by Parse); match them with errors.As.
type FieldError struct {
	// Object names the object: `VariantAutoscaling "llama-8b-a10g"` or a
	// ConfigMap's name such as "wva-saturation-scaling-config".
	Object string
	// Field is the dotted path of the field, e.g. "spec.maxReplicas" or
	// "data.default.scaleDownBoundary"; map keys that are not simple
	// identifiers are written ["key"]. Empty when the problem is the whole
	// object.
	Field string
	// Msg says what is wrong, e.g. "unknown field" or
	// "must be below scaleUpThreshold (0.85), got 0.9".
	Msg string
}

// Error formats the error as "<object>: <field>: <message>".
func (e *FieldError) Error() string {
	var b strings.Builder
	if e.Object != "" {
		b.WriteString(e.Object)
		b.WriteString(": ")
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// DocumentError is an error in one document of a YAML stream given to
// Parse. Index counts the documents of the stream from 1, empty documents
// included, so that it locates the document in the file.
type DocumentError struct {
	Index int
	Err   error
}

// Error formats the error as "document <index>: <error>".
func (e *DocumentError) Error() string { return fmt.Sprintf("document %d: %v", e.Index, e.Err) }

// Unwrap returns the error in the document.
func (e *DocumentError) Unwrap() error { return e.Err }

// problem is a FieldError before the object is known. related names the
// other field of a cross-field rule ("" for single-field rules).
type problem struct {
	field   string
	related string
	msg     string
}

// problems collects the problems of one object.
type problems []problem

func (p *problems) addf(field, format string, args ...any) {
	*p = append(*p, problem{field: field, msg: fmt.Sprintf(format, args...)})
}

// addRelf adds a problem with field that involves the field related.
func (p *problems) addRelf(field, related, format string, args ...any) {
	*p = append(*p, problem{field: field, related: related, msg: fmt.Sprintf(format, args...)})
}

// errs turns the problems into FieldErrors of object.
func (p problems) errs(object string) []error {
	out := make([]error, 0, len(p))
	for _, q := range p {
		out = append(out, &FieldError{Object: object, Field: q.field, Msg: q.msg})
	}
	return out
}

// joinPath appends a map key or field name to a dotted path. Keys that are
// not plain identifiers are quoted in brackets.
func joinPath(path, key string) string {
	if !plainKey(key) {
		return fmt.Sprintf("%s[%q]", path, key)
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

func plainKey(key string) bool {
	if key == "" {
		return false
	}
	for _, r := range key {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
		default:
			return false
		}
	}
	return true
}

// indexPath appends a sequence index to a path.
func indexPath(path string, i int) string { return fmt.Sprintf("%s[%d]", path, i) }

// joinErrs is errors.Join, nil for no errors.
func joinErrs(errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	return errors.Join(errs...)
}
