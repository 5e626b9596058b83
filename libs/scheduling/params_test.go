package scheduling

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

type warnRecorder struct {
	Handle
	warnings []string
}

func (w *warnRecorder) Warn(msg string) { w.warnings = append(w.warnings, msg) }

type testParams struct {
	Threshold int               `json:"threshold"`
	Ratio     float64           `json:"ratio"`
	On        bool              `json:"on"`
	Label     string            `json:"label"`
	Timeout   Duration          `json:"timeout"`
	Seed      Uint64            `json:"seed"`
	Optional  *int              `json:"optional"`
	Values    []string          `json:"values"`
	Labels    map[string]string `json:"labels"`
	Nested    struct {
		Prefill string `json:"prefill"`
		Deep    struct {
			N uint `json:"n"`
		} `json:"deep"`
	} `json:"nested"`
	Items []struct {
		Key string `json:"key"`
	} `json:"items"`
}

func TestDecodeParametersValues(t *testing.T) {
	p := testParams{Threshold: 128, Label: "default", Timeout: Duration(2 * time.Minute)}
	w := &warnRecorder{}
	raw := `{"threshold": 5, "ratio": 0.25, "on": true, "timeout": "30s", "optional": 7,
		"values": ["a","b"], "labels": {"k": "v"}, "nested": {"prefill": "p", "deep": {"n": 3}},
		"items": [{"key": "x"}], "label": null, "podSelector": 1, "hashSeedSalt": {"x": 1}}`
	if err := DecodeParameters(json.RawMessage(raw), &p, w); err != nil {
		t.Fatal(err)
	}
	if p.Threshold != 5 || p.Ratio != 0.25 || !p.On || p.Timeout.Std() != 30*time.Second || *p.Optional != 7 ||
		!slices.Equal(p.Values, []string{"a", "b"}) || p.Labels["k"] != "v" || p.Nested.Prefill != "p" ||
		p.Nested.Deep.N != 3 || p.Items[0].Key != "x" {
		t.Errorf("decoded %+v", p)
	}
	if p.Label != "default" {
		t.Errorf("null should keep the default, got %q", p.Label)
	}
	want := []string{"parameters.hashSeedSalt: unknown parameter, ignored", "parameters.podSelector: unknown parameter, ignored"}
	if !slices.Equal(w.warnings, want) {
		t.Errorf("warnings = %q, want %q", w.warnings, want)
	}
}

func TestDecodeParametersCaseInsensitiveLikeEncodingJSON(t *testing.T) {
	var p testParams
	if err := DecodeParameters(json.RawMessage(`{"Threshold": 9}`), &p, nil); err != nil {
		t.Fatal(err)
	}
	if p.Threshold != 9 {
		t.Errorf("Threshold = %d", p.Threshold)
	}
}

// Uint64 takes an integer or a string of one, as upstream writes hashSeed.
func TestDecodeParametersUint64FromIntegerOrString(t *testing.T) {
	for raw, want := range map[string]Uint64{`{"seed": 42}`: 42, `{"seed": "42"}`: 42, `{"seed": " 7 "}`: 7, `{"seed": ""}`: 0, `{"seed": "18446744073709551615"}`: 1<<64 - 1} {
		var p testParams
		if err := DecodeParameters(json.RawMessage(raw), &p, nil); err != nil || p.Seed != want {
			t.Errorf("%s: seed %d, error %v; want %d", raw, p.Seed, err, want)
		}
	}
}

func TestDecodeParametersErrors(t *testing.T) {
	cases := []struct{ raw, want string }{
		{`{"threshold": "lots"}`, `parameters.threshold: must be an integer (got "lots")`},
		{`{"threshold": 1.5}`, `parameters.threshold: must be an integer (got 1.5)`},
		{`{"ratio": "x"}`, `parameters.ratio: must be a number`},
		{`{"on": "yes"}`, `parameters.on: must be a boolean`},
		{`{"label": 3}`, `parameters.label: must be a string`},
		{`{"timeout": "2x"}`, `parameters.timeout: must be a duration such as "2m" or "500ms" (got "2x")`},
		{`{"timeout": 120}`, `parameters.timeout: must be a duration string`},
		{`{"seed": "forty-two"}`, `parameters.seed: must be a non-negative integer, or a string of one (got "forty-two")`},
		{`{"seed": -1}`, `parameters.seed: must be a non-negative integer, or a string of one (got -1)`},
		{`{"seed": true}`, `parameters.seed: must be a non-negative integer`},
		{`{"values": "a"}`, `parameters.values: must be a list`},
		{`{"values": [1]}`, `parameters.values[0]: must be a string`},
		{`{"labels": []}`, `parameters.labels: must be an object`},
		{`{"labels": {"k": 1}}`, `parameters.labels.k: must be a string`},
		{`{"nested": {"prefill": 1}}`, `parameters.nested.prefill: must be a string`},
		{`{"nested": {"deep": {"n": -1}}}`, `parameters.nested.deep.n: must be a non-negative integer`},
		{`{"items": [{"key": "ok"}, {"key": false}]}`, `parameters.items[1].key: must be a string`},
		{`[1, 2]`, `parameters: must be an object`},
		{`"text"`, `parameters: must be an object`},
	}
	for _, c := range cases {
		var p testParams
		err := DecodeParameters(json.RawMessage(c.raw), &p, nil)
		if err == nil {
			t.Errorf("%s: no error", c.raw)
			continue
		}
		var pe *ParamError
		if !errors.As(err, &pe) {
			t.Errorf("%s: error %T is not a *ParamError", c.raw, err)
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s:\n got  %q\n want %q", c.raw, err, c.want)
		}
	}
}

// A key two edits or fewer from a known parameter is a typo, not a foreign
// parameter: it fails instead of being ignored.
func TestDecodeParametersTypos(t *testing.T) {
	for raw, want := range map[string]string{
		`{"treshold": 5}`:           `parameters.treshold: unknown parameter; did you mean "threshold"?`,
		`{"thresholds": 5}`:         `parameters.thresholds: unknown parameter; did you mean "threshold"?`,
		`{"nested": {"prefil": 1}}`: `parameters.nested.prefil: unknown parameter; did you mean "prefill"?`,
		`{"valuess": []}`:           `parameters.valuess: unknown parameter; did you mean "values"?`,
	} {
		var p testParams
		err := DecodeParameters(json.RawMessage(raw), &p, nil)
		if err == nil || err.Error() != want {
			t.Errorf("%s: got %v, want %s", raw, err, want)
		}
	}
	// short keys are too short to call typos
	var p testParams
	if err := DecodeParameters(json.RawMessage(`{"onn": true}`), &p, nil); err != nil {
		t.Errorf("short unknown key: %v", err)
	}
}

func TestDecodeParametersSameFieldTwice(t *testing.T) {
	var p testParams
	err := DecodeParameters(json.RawMessage(`{"threshold": 1, "Threshold": 2}`), &p, nil)
	if err == nil || err.Error() != `parameters.threshold: set twice, as "Threshold" and "threshold"` {
		t.Errorf("got %v", err)
	}
}

func TestDecodeParametersEmpty(t *testing.T) {
	p := testParams{Threshold: 1}
	for _, raw := range []string{"", "null", "  "} {
		if err := DecodeParameters(json.RawMessage(raw), &p, nil); err != nil || p.Threshold != 1 {
			t.Errorf("%q: err %v, threshold %d", raw, err, p.Threshold)
		}
	}
	if err := DecodeParameters(nil, p, nil); err == nil {
		t.Error("non-pointer destination accepted")
	}
}

func TestDurationJSON(t *testing.T) {
	b, err := json.Marshal(Duration(90 * time.Second))
	if err != nil || string(b) != `"1m30s"` {
		t.Errorf("marshal = %s, %v", b, err)
	}
}

func TestParamErrorf(t *testing.T) {
	if got := ParamErrorf("primaryPort", "must be between 1 and 65535 (got %d)", 70000).Error(); got != "parameters.primaryPort: must be between 1 and 65535 (got 70000)" {
		t.Errorf("got %q", got)
	}
}
