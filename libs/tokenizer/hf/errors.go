package hf

import (
	"errors"
	"fmt"
)

// ErrUnsupported is wrapped by load errors for tokenizer.json features this
// package does not implement (as opposed to malformed files). A caller may
// branch on it, for example to fall back to the engine's /tokenize.
var ErrUnsupported = errors.New("not supported")

// FieldError reports a problem with one field of tokenizer.json.
type FieldError struct {
	// Field is the JSON path of the field, e.g. "model.merges[12]".
	Field string
	Err   error
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Err.Error() }

func (e *FieldError) Unwrap() error { return e.Err }

// fieldErrorf returns a FieldError for field with a formatted message.
func fieldErrorf(field, format string, args ...any) error {
	return &FieldError{Field: field, Err: fmt.Errorf(format, args...)}
}

// unsupported returns a FieldError saying that value of field is not
// supported; it wraps ErrUnsupported.
func unsupported(field string, value any) error {
	return &FieldError{Field: field, Err: fmt.Errorf("%#v is %w", value, ErrUnsupported)}
}
