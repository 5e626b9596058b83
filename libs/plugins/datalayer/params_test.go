package datalayer

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hermod/hermod/libs/scheduling"
)

// warnings is a scheduling.Handle that records warnings (the only method
// the parameter decoding uses).
type warnings struct {
	scheduling.Handle
	got []string
}

func (w *warnings) Warn(msg string) { w.got = append(w.got, msg) }

func TestDecodeModelsParams(t *testing.T) {
	def := DefaultModelsParams()
	tests := []struct {
		name     string
		raw      string
		want     ModelsParams
		warnings []string
	}{
		{"none", ``, def, nil},
		{"null", `null`, def, nil},
		{"empty", `{}`, def, nil},
		{"reference/001 defaults spelled out (an explicit skip is kept)", `{"scheme":"http","path":"/v1/models","insecureSkipVerify":true}`,
			ModelsParams{Scheme: "http", Path: DefaultPath, InsecureSkipVerify: true}, nil},
		{"https verified, custom path", `{"scheme":"https","path":"/custom/models","insecureSkipVerify":false}`,
			ModelsParams{Scheme: "https", Path: "/custom/models"}, nil},
		{"scheme case, verified by default", `{"scheme":"HTTPS"}`, ModelsParams{Scheme: "https", Path: DefaultPath}, nil},
		{"path without a slash", `{"path":"v1/models"}`, def, nil},
		{"null keeps a default", `{"scheme":null,"insecureSkipVerify":null}`, def, nil},
		{"upstream interval", `{"interval":"5s"}`,
			ModelsParams{Scheme: "http", Path: DefaultPath, Interval: scheduling.Duration(5 * time.Second)}, nil},
		{"zero interval", `{"interval":"0s"}`, def, nil},
		{"interval below the minimum", `{"interval":"10ms"}`,
			ModelsParams{Scheme: "http", Path: DefaultPath, Interval: scheduling.Duration(MinInterval)},
			[]string{"parameters.interval: 10ms is below the minimum; polling every 50ms"}},
		{"unknown parameters warn", `{"caCertPath":"/etc/ca.pem","extra":1}`, def,
			[]string{"parameters.caCertPath: unknown parameter, ignored", "parameters.extra: unknown parameter, ignored"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := &warnings{}
			got, err := DecodeModelsParams(json.RawMessage(tc.raw), w)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
			if strings.Join(w.got, "\n") != strings.Join(tc.warnings, "\n") {
				t.Errorf("warnings %q, want %q", w.got, tc.warnings)
			}
		})
	}
}

func TestDecodeModelsParamsErrors(t *testing.T) {
	tests := []struct{ name, raw, want string }{
		{"unknown scheme", `{"scheme":"ftp"}`, `parameters.scheme: must be "http" or "https" (got "ftp")`},
		{"empty scheme", `{"scheme":""}`, `parameters.scheme: must be "http" or "https" (got "")`},
		{"scheme not a string", `{"scheme":1}`, `parameters.scheme: must be a string (got 1)`},
		{"typo of scheme", `{"schema":"https"}`, `parameters.schema: unknown parameter; did you mean "scheme"?`},
		{"empty path", `{"path":""}`, `parameters.path: must not be empty (the default is "/v1/models")`},
		{"path with a query", `{"path":"/v1/models?all=1"}`, `parameters.path: must be a URL path, without query or fragment (got "/v1/models?all=1")`},
		{"path with a space", `{"path":"/v1/my models"}`, `parameters.path: must not contain spaces or control characters`},
		{"path not a string", `{"path":["/v1/models"]}`, `parameters.path: must be a string`},
		{"insecureSkipVerify not a boolean", `{"insecureSkipVerify":"yes"}`, `parameters.insecureSkipVerify: must be a boolean (got "yes")`},
		{"negative interval", `{"interval":"-1s"}`, `parameters.interval: must not be negative (got -1s)`},
		{"interval not a duration", `{"interval":"soon"}`, `parameters.interval: must be a duration such as "2m" or "500ms" (got "soon")`},
		{"interval a number", `{"interval":5}`, `parameters.interval: must be a duration string`},
		{"not an object", `["http"]`, `parameters: must be an object`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeModelsParams(json.RawMessage(tc.raw), nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
			var pe *scheduling.ParamError
			if !errors.As(err, &pe) {
				t.Errorf("error %T is not a *scheduling.ParamError", err)
			}
		})
	}
}

// NewModelsSource checks parameters built in code as a config's are.
func TestNewModelsSourceChecksParams(t *testing.T) {
	if _, err := NewModelsSource("", ModelsParams{Scheme: "gopher", Path: "/"}); err == nil || !strings.Contains(err.Error(), "parameters.scheme") {
		t.Errorf("error %v", err)
	}
	s, err := NewModelsSource("", ModelsParams{Scheme: "HTTP", Path: "models", Interval: scheduling.Duration(time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	if got, want := s.Params(), (ModelsParams{Scheme: "http", Path: "/models", Interval: scheduling.Duration(MinInterval)}); got != want {
		t.Errorf("params %+v, want %+v", got, want)
	}
	if tn := s.TypedName(); tn.Type != ModelsSourceType || tn.Name != ModelsSourceType {
		t.Errorf("typed name %+v", tn)
	}
}
