// Package telemetry holds the logging, metrics and tracing set-up every
// Hermod binary shares.
package telemetry

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"go.opentelemetry.io/otel/trace"
)

// V returns the slog level of klog-style verbosity n: V(0) is Info, and each
// step below is one level more verbose (V(4) = slog.LevelDebug, the level of
// per-request plugin logs such as "Running scorer").
func V(n int) slog.Level { return slog.LevelInfo - slog.Level(n) }

// Levels every service uses.
var (
	// LevelRequest is V(4): one or more lines per request per plugin.
	LevelRequest = V(4)
	// LevelTrace is V(5): everything.
	LevelTrace = V(5)
)

// LogFormat is the output format of NewLogger.
type LogFormat string

// Formats NewLogger supports.
const (
	FormatJSON LogFormat = "json"
	FormatText LogFormat = "text"
)

// NewLogger returns a logger writing to w in format, emitting records at
// verbosity v and below (v in 0..5; negative values keep only warnings and
// errors). Services log JSON; tools may log text. A record logged with a
// context that carries a span (LogAttrs(ctx, ...), InfoContext, ...) has
// its trace_id and span_id (see TraceHandler).
func NewLogger(w io.Writer, format LogFormat, v int) (*slog.Logger, error) {
	level := V(v)
	if v < 0 {
		level = slog.LevelWarn
	}
	opts := &slog.HandlerOptions{Level: level, ReplaceAttr: levelNames}
	switch LogFormat(strings.ToLower(string(format))) {
	case FormatJSON, "":
		return slog.New(TraceHandler(slog.NewJSONHandler(w, opts))), nil
	case FormatText:
		return slog.New(TraceHandler(slog.NewTextHandler(w, opts))), nil
	}
	return nil, fmt.Errorf("log format %q: must be json or text", format)
}

// Keys of the trace attributes TraceHandler adds.
const (
	TraceIDKey = "trace_id"
	SpanIDKey  = "span_id"
)

// TraceHandler wraps h so that every record whose context carries a valid
// span context (a span started by the request's instrumentation, or a
// remote parent extracted from its traceparent) also has the attributes
// trace_id and span_id (lower-case hex, as in a W3C traceparent), which
// link the log line to its trace. Records without such a context pass
// through unchanged, at the cost of one context lookup. The attributes
// are added where the record's own attributes go: inside the logger's
// groups, if it has any (services log without groups).
func TraceHandler(h slog.Handler) slog.Handler {
	if _, ok := h.(traceHandler); ok {
		return h
	}
	return traceHandler{h}
}

type traceHandler struct{ h slog.Handler }

func (t traceHandler) Enabled(ctx context.Context, l slog.Level) bool { return t.h.Enabled(ctx, l) }

func (t traceHandler) Handle(ctx context.Context, r slog.Record) error {
	if ctx != nil {
		if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
			// Clone: a record handed to several handlers must not share
			// the attributes added here.
			r = r.Clone()
			r.AddAttrs(slog.String(TraceIDKey, sc.TraceID().String()), slog.String(SpanIDKey, sc.SpanID().String()))
		}
	}
	return t.h.Handle(ctx, r)
}

func (t traceHandler) WithAttrs(as []slog.Attr) slog.Handler { return traceHandler{t.h.WithAttrs(as)} }

func (t traceHandler) WithGroup(name string) slog.Handler { return traceHandler{t.h.WithGroup(name)} }

// levelNames prints verbose levels as "V4" rather than "DEBUG+0".
func levelNames(_ []string, a slog.Attr) slog.Attr {
	if a.Key != slog.LevelKey {
		return a
	}
	lvl, ok := a.Value.Any().(slog.Level)
	if !ok || lvl >= slog.LevelInfo {
		return a
	}
	return slog.String(slog.LevelKey, fmt.Sprintf("V%d", int(slog.LevelInfo-lvl)))
}
