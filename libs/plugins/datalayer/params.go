package datalayer

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/hermod/hermod/libs/scheduling"
)

// Defaults of ModelsParams (reference/001).
const (
	DefaultScheme             = "http"
	DefaultPath               = "/v1/models"
	DefaultInsecureSkipVerify = false
)

// MinInterval is the shortest interval a models-data-source polls at. A
// shorter one is raised to it with a warning: upstream rounds intervals up
// to its 50 ms base tick.
const MinInterval = 50 * time.Millisecond

// ModelsParams are models-data-source's parameters.
type ModelsParams struct {
	// Scheme is how endpoints are reached: "http" or "https".
	Scheme string `json:"scheme"`
	// Path is the URL path of the model list.
	Path string `json:"path"`
	// InsecureSkipVerify skips the verification of the endpoints' TLS
	// certificates (https only). With false, certificates are verified
	// against the system's roots.
	InsecureSkipVerify bool `json:"insecureSkipVerify"`
	// Interval is how often each endpoint is polled (a later upstream
	// parameter). Zero leaves it to the poller: the collector's
	// --models-interval.
	Interval scheduling.Duration `json:"interval,omitempty"`
}

// DefaultModelsParams returns the parameters of a models-data-source
// configured without any: http, /v1/models, insecureSkipVerify true.
func DefaultModelsParams() ModelsParams {
	return ModelsParams{Scheme: DefaultScheme, Path: DefaultPath, InsecureSkipVerify: DefaultInsecureSkipVerify}
}

// DecodeModelsParams decodes a models-data-source's raw parameters over the
// defaults and checks them. Errors are *scheduling.ParamError values naming
// the field; unknown parameters are reported through h.Warn (h may be nil).
func DecodeModelsParams(raw json.RawMessage, h scheduling.Handle) (ModelsParams, error) {
	p := DefaultModelsParams()
	if err := scheduling.DecodeParameters(raw, &p, h); err != nil {
		return ModelsParams{}, err
	}
	warn := func(string) {}
	if h != nil {
		warn = h.Warn
	}
	if err := p.normalize(warn); err != nil {
		return ModelsParams{}, err
	}
	return p, nil
}

// normalize checks p and puts it in canonical form: a lower-case scheme, a
// path starting with "/", an interval of at least MinInterval.
func (p *ModelsParams) normalize(warn func(string)) error {
	if err := checkSchemePath(&p.Scheme, &p.Path, DefaultPath); err != nil {
		return err
	}
	switch d := p.Interval.Std(); {
	case d < 0:
		return scheduling.ParamErrorf("interval", "must not be negative (got %s)", d)
	case d > 0 && d < MinInterval:
		warn(fmt.Sprintf("parameters.interval: %s is below the minimum; polling every %s", d, MinInterval))
		p.Interval = scheduling.Duration(MinInterval)
	}
	return nil
}

// checkSchemePath checks a source's scheme and path and puts them in
// canonical form: a lower-case scheme, a path starting with "/".
func checkSchemePath(scheme, path *string, defaultPath string) error {
	switch s := strings.ToLower(*scheme); s {
	case "http", "https":
		*scheme = s
	default:
		return scheduling.ParamErrorf("scheme", `must be "http" or "https" (got %q)`, *scheme)
	}
	switch p := *path; {
	case p == "":
		return scheduling.ParamErrorf("path", "must not be empty (the default is %q)", defaultPath)
	case strings.ContainsAny(p, "?#"):
		return scheduling.ParamErrorf("path", "must be a URL path, without query or fragment (got %q)", p)
	case strings.IndexFunc(p, func(r rune) bool { return r <= ' ' || r == 0x7f }) >= 0:
		return scheduling.ParamErrorf("path", "must not contain spaces or control characters (got %q)", p)
	case !strings.HasPrefix(p, "/"):
		// Upstream joins the path to the host with a slash as well.
		*path = "/" + p
	}
	return nil
}
