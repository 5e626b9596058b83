package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

func TestVerbosityLevels(t *testing.T) {
	if V(0) != slog.LevelInfo || V(4) != slog.LevelDebug || LevelRequest != V(4) {
		t.Fatalf("V(0)=%v V(4)=%v", V(0), V(4))
	}
	for _, c := range []struct {
		v            int
		v2, v4, warn bool
	}{
		{-1, false, false, true},
		{0, false, false, true},
		{2, true, false, true},
		{4, true, true, true},
	} {
		var buf bytes.Buffer
		l, err := NewLogger(&buf, FormatJSON, c.v)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		if got := l.Enabled(ctx, V(2)); got != c.v2 {
			t.Errorf("-v=%d: V(2) enabled = %v", c.v, got)
		}
		if got := l.Enabled(ctx, V(4)); got != c.v4 {
			t.Errorf("-v=%d: V(4) enabled = %v", c.v, got)
		}
		if got := l.Enabled(ctx, slog.LevelWarn); got != c.warn {
			t.Errorf("-v=%d: warn enabled = %v", c.v, got)
		}
		if c.v >= 0 && l.Enabled(ctx, slog.LevelInfo) != true {
			t.Errorf("-v=%d: info disabled", c.v)
		}
	}
}

func TestLogFormats(t *testing.T) {
	var buf bytes.Buffer
	l, err := NewLogger(&buf, FormatJSON, 4)
	if err != nil {
		t.Fatal(err)
	}
	l.Log(context.Background(), LevelRequest, "Running scorer", "scorer", "queue-scorer")
	var rec map[string]any
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
		t.Fatalf("not JSON: %s", buf.String())
	}
	if rec["level"] != "V4" || rec["msg"] != "Running scorer" || rec["scorer"] != "queue-scorer" {
		t.Errorf("record = %v", rec)
	}
	buf.Reset()
	l, err = NewLogger(&buf, FormatText, 0)
	if err != nil {
		t.Fatal(err)
	}
	l.Info("hello", "k", "v")
	if !strings.Contains(buf.String(), "level=INFO") || !strings.Contains(buf.String(), "k=v") {
		t.Errorf("text = %q", buf.String())
	}
	if _, err := NewLogger(&buf, "xml", 0); err == nil || !strings.Contains(err.Error(), `log format "xml"`) {
		t.Errorf("bad format: %v", err)
	}
}

func TestTraceHandler(t *testing.T) {
	tp := sdktrace.NewTracerProvider()
	defer func() { _ = tp.Shutdown(context.Background()) }()
	ctx, span := tp.Tracer("test").Start(context.Background(), "request")
	defer span.End()
	sc := span.SpanContext()
	remote := trace.ContextWithRemoteSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:  trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7}, TraceFlags: trace.FlagsSampled, Remote: true}))
	invalid := trace.ContextWithSpanContext(context.Background(), trace.SpanContext{})

	for _, c := range []struct {
		name          string
		ctx           context.Context
		trace, spanID string // "" = no attribute
	}{
		{"span", ctx, sc.TraceID().String(), sc.SpanID().String()},
		{"remote parent (traceparent only)", remote, "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"},
		{"no span", context.Background(), "", ""},
		{"invalid span context", invalid, "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			l, err := NewLogger(&buf, FormatJSON, 0)
			if err != nil {
				t.Fatal(err)
			}
			l = l.With("pool", "p")
			// more attributes than a record holds inline
			l.LogAttrs(c.ctx, slog.LevelInfo, "request done", slog.String("request_id", "r1"), slog.Int("a", 1),
				slog.Int("b", 2), slog.Int("c", 3), slog.Int("d", 4), slog.Int("e", 5))
			var rec map[string]any
			if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
				t.Fatalf("not JSON: %s", buf.String())
			}
			if rec["pool"] != "p" || rec["request_id"] != "r1" || rec["e"] != float64(5) {
				t.Errorf("the record's own attributes are lost: %v", rec)
			}
			got, has := rec[TraceIDKey]
			if c.trace == "" {
				if has || rec[SpanIDKey] != nil {
					t.Errorf("trace attributes without a span: %v", rec)
				}
				return
			}
			if got != c.trace || rec[SpanIDKey] != c.spanID {
				t.Errorf("trace_id=%v span_id=%v, want %s %s", got, rec[SpanIDKey], c.trace, c.spanID)
			}
		})
	}

	t.Run("text and context-less calls", func(t *testing.T) {
		var buf bytes.Buffer
		l, err := NewLogger(&buf, FormatText, 0)
		if err != nil {
			t.Fatal(err)
		}
		l.InfoContext(ctx, "with")
		l.Info("without")
		l.Log(nil, slog.LevelInfo, "nil context") //nolint:staticcheck // a nil context must not break logging
		lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
		if len(lines) != 3 || !strings.Contains(lines[0], "trace_id="+sc.TraceID().String()) ||
			!strings.Contains(lines[0], "span_id="+sc.SpanID().String()) || strings.Contains(lines[1], "trace_id") ||
			strings.Contains(lines[2], "trace_id") {
			t.Errorf("text:\n%s", buf.String())
		}
	})

	t.Run("a record handed to several handlers", func(t *testing.T) {
		var a, b bytes.Buffer
		fan := fanout{TraceHandler(slog.NewJSONHandler(&a, nil)), TraceHandler(slog.NewJSONHandler(&b, nil))}
		r := slog.NewRecord(time.Now(), slog.LevelInfo, "m", 0)
		r.AddAttrs(slog.Int("a", 1), slog.Int("b", 2), slog.Int("c", 3), slog.Int("d", 4), slog.Int("e", 5),
			slog.Int("f", 6), slog.Int("g", 7), slog.Int("h", 8))
		r.AddAttrs(slog.Int("i", 9)) // leaves spare capacity at the end of the record's attributes
		if err := fan.Handle(ctx, r); err != nil {
			t.Fatal(err)
		}
		if strings.Count(a.String(), `"trace_id"`) != 1 || strings.Count(b.String(), `"trace_id"`) != 1 || strings.Contains(a.String()+b.String(), "BUG") {
			t.Errorf("a: %s\nb: %s", a.String(), b.String())
		}
	})

	if h := TraceHandler(slog.NewJSONHandler(io.Discard, nil)); TraceHandler(h) != h {
		t.Error("TraceHandler wraps its own handler again")
	}
}

// fanout hands each record to every handler.
type fanout []slog.Handler

func (f fanout) Enabled(context.Context, slog.Level) bool { return true }
func (f fanout) Handle(ctx context.Context, r slog.Record) error {
	for _, h := range f {
		if err := h.Handle(ctx, r); err != nil {
			return err
		}
	}
	return nil
}
func (f fanout) WithAttrs([]slog.Attr) slog.Handler { return f }
func (f fanout) WithGroup(string) slog.Handler      { return f }

// BenchmarkLogNoSpan is the cost of a request log line without a span
// (tracing off): TraceHandler's context lookup next to the JSON encoding.
func BenchmarkLogNoSpan(b *testing.B) {
	for _, wrap := range []bool{false, true} {
		b.Run(fmt.Sprintf("traceHandler=%t", wrap), func(b *testing.B) {
			var h slog.Handler = slog.NewJSONHandler(io.Discard, nil)
			if wrap {
				h = TraceHandler(h)
			}
			l := slog.New(h)
			ctx := context.WithValue(context.Background(), benchKey{}, 1)
			b.ReportAllocs()
			for b.Loop() {
				l.LogAttrs(ctx, slog.LevelInfo, "request done", slog.String("request_id", "r1"), slog.Int("status", 200))
			}
		})
	}
}

type benchKey struct{}
