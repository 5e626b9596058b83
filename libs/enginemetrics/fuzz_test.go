package enginemetrics

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// FuzzParse checks that Parse never panics, that what it returns is in
// range, that its errors name a line of the body, and that on every body
// expfmt accepts whole, Parse agrees: no error (but for a quirk of expfmt,
// see quotedNamePart), and the same Metrics.
func FuzzParse(f *testing.F) {
	for _, name := range []string{"vllm-multi.prom", "sglang.prom"} {
		f.Add(readTestdata(f, name), false)
	}
	f.Add(readTestdata(f, "vllm-openmetrics.prom"), true)
	p := NewParser()
	f.Fuzz(func(t *testing.T, body []byte, openMetrics bool) {
		format := FormatText
		if openMetrics {
			format = FormatOpenMetrics
		}
		got, err := p.Parse(body, format)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v is not a *ParseError", err)
			}
			if lines := bytes.Count(body, []byte("\n")) + 1; pe.Line < 1 || pe.Line > lines {
				t.Fatalf("error %v names line %d of %d", err, pe.Line, lines)
			}
		} else {
			checkRanges(t, got)
		}
		if openMetrics {
			return
		}
		tp := expfmt.NewTextParser(model.UTF8Validation)
		families, fullErr := tp.TextToMetricFamilies(bytes.NewReader(body))
		if fullErr != nil {
			return
		}
		if err != nil {
			var pe *ParseError
			if errors.As(err, &pe) && quotedNamePart(bodyLine(body, pe.Line)) {
				return
			}
			t.Fatalf("expfmt accepts the body, Parse: %v", err)
		}
		if want := extract(families); !reflect.DeepEqual(got, want) {
			t.Fatalf("Parse:\n got %+v\nwhole-body parse %+v", got, want)
		}
	})
}

// quotedNamePart reports whether a line's metric name is a legacy name
// with a quoted part (foo"bar", which expfmt reads as foobar, also as the
// first name in braces, {foo"bar"}): the one quirk of expfmt that Parse
// does not follow.
func quotedNamePart(line []byte) bool {
	s := strings.TrimLeft(string(line), " \t")
	for _, kw := range []string{"# HELP", "# TYPE", "#HELP", "#TYPE"} {
		if rest, ok := strings.CutPrefix(s, kw); ok {
			s = strings.TrimLeft(rest, " \t")
			break
		}
	}
	if rest, ok := strings.CutPrefix(s, "{"); ok {
		s = strings.TrimLeft(rest, " \t")
	}
	n := 0
	for n < len(s) && (isNameStart(s[n]) || s[n] == ':' || n > 0 && isDigit(s[n])) {
		n++
	}
	return n > 0 && n < len(s) && s[n] == '"'
}

// bodyLine returns line n (1-based) of body.
func bodyLine(body []byte, n int) []byte {
	lines := bytes.Split(body, []byte("\n"))
	if n < 1 || n > len(lines) {
		return nil
	}
	return lines[n-1]
}

func checkRanges(t *testing.T, m Metrics) {
	t.Helper()
	if m.Engine != EngineVLLM && m.Engine != EngineSGLang {
		t.Fatalf("engine %q", m.Engine)
	}
	if m.Waiting < 0 || m.Running < 0 || m.BlockSize < 0 || m.NumGPUBlocks < 0 || m.MaxLoRA < 0 {
		t.Fatalf("negative count in %+v", m)
	}
	if !(m.KVCacheUsage >= 0 && m.KVCacheUsage <= 1) {
		t.Fatalf("kv cache usage %v", m.KVCacheUsage)
	}
	for _, a := range append(m.RunningLoRAAdapters, m.WaitingLoRAAdapters...) {
		if a == "" || strings.Contains(a, ",") {
			t.Fatalf("adapter %q", a)
		}
	}
}
