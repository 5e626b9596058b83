package scheduling

import (
	"errors"
	"fmt"
	"net/http"
)

// ErrorKind classifies scheduling failures by what the client should be told.
type ErrorKind uint8

// Error kinds. Each maps to one HTTP status (see HTTPStatus).
const (
	// KindInternal is a bug or an unexpected plugin failure (500).
	KindInternal ErrorKind = iota
	// KindNoCandidates: the pool has no ready endpoint for the request (503).
	KindNoCandidates
	// KindShed: the request is shed: an admission plugin refused it (the
	// pool is saturated) or a picker chose no endpoint (429).
	KindShed
	// KindBadRequest: the request cannot be scheduled as sent (400).
	KindBadRequest
	// KindNoMatch: a profile's filters left none of the ready endpoints.
	// It is not load: the config matches no endpoint of the fleet (a
	// selector names labels no endpoint has, say) and retrying does not
	// help until the config or the fleet changes (503).
	KindNoMatch
)

// HTTPStatus is the status code a front door answers with for this kind.
func (k ErrorKind) HTTPStatus() int {
	switch k {
	case KindNoCandidates, KindNoMatch:
		return http.StatusServiceUnavailable
	case KindShed:
		return http.StatusTooManyRequests
	case KindBadRequest:
		return http.StatusBadRequest
	}
	return http.StatusInternalServerError
}

func (k ErrorKind) String() string {
	switch k {
	case KindNoCandidates:
		return "no_candidates"
	case KindShed:
		return "shed"
	case KindBadRequest:
		return "bad_request"
	case KindNoMatch:
		return "no_match"
	}
	return "internal"
}

// Sentinel errors callers branch on with errors.Is; every *Error matches the
// sentinel of its kind.
var (
	ErrNoCandidates = &Error{Kind: KindNoCandidates, Msg: "no ready endpoints"}
	ErrShed         = &Error{Kind: KindShed, Msg: "the request was shed"}
	ErrBadRequest   = &Error{Kind: KindBadRequest, Msg: "bad request"}
	ErrNoMatch      = &Error{Kind: KindNoMatch, Msg: "the filters left no endpoint"}
)

// Error is a scheduling failure with its kind.
type Error struct {
	Kind ErrorKind
	// Profile is the scheduling profile that failed, if one did.
	Profile string
	// Filter is the filter that removed the last candidates, if one did.
	Filter string
	Msg    string
	Err    error
}

func (e *Error) Error() string {
	msg := e.Msg
	if e.Profile != "" {
		msg = fmt.Sprintf("profile %q: %s", e.Profile, msg)
	}
	if e.Err != nil {
		return msg + ": " + e.Err.Error()
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }

// Is matches the sentinel of the same kind.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Kind == e.Kind && (t == ErrNoCandidates || t == ErrShed || t == ErrBadRequest || t == ErrNoMatch)
}

// HTTPStatus is the status for this error.
func (e *Error) HTTPStatus() int { return e.Kind.HTTPStatus() }

// HTTPStatus returns the status code for any error a Schedule call returned:
// the kind's status for *Error, 500 otherwise.
func HTTPStatus(err error) int {
	var se *Error
	if errors.As(err, &se) {
		return se.HTTPStatus()
	}
	return http.StatusInternalServerError
}

// BadRequestf returns a KindBadRequest error.
func BadRequestf(format string, args ...any) error {
	return &Error{Kind: KindBadRequest, Msg: fmt.Sprintf(format, args...)}
}
