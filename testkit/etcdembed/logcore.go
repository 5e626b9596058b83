package etcdembed

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"strings"

	"go.uber.org/zap/zapcore"
)

// levelEnabler enables the zap levels at or above the server's LogLevel,
// none while the server stops.
type levelEnabler struct{ s *Server }

func (e levelEnabler) Enabled(l zapcore.Level) bool {
	return !e.s.quiet.Load() && slogLevel(l) >= e.s.opts.LogLevel.Level()
}

// slogLevel maps a zap level onto slog's scale (zap's DPanic, Panic and
// Fatal are above slog's Error).
func slogLevel(l zapcore.Level) slog.Level {
	switch {
	case l <= zapcore.DebugLevel:
		return slog.LevelDebug
	case l == zapcore.InfoLevel:
		return slog.LevelInfo
	case l == zapcore.WarnLevel:
		return slog.LevelWarn
	case l == zapcore.ErrorLevel:
		return slog.LevelError
	default:
		return slog.LevelError + 4*slog.Level(l-zapcore.ErrorLevel)
	}
}

// zapLevel maps an slog level onto the nearest zap level at or below it.
func zapLevel(l slog.Level) zapcore.Level {
	switch {
	case l < slog.LevelInfo:
		return zapcore.DebugLevel
	case l < slog.LevelWarn:
		return zapcore.InfoLevel
	case l < slog.LevelError:
		return zapcore.WarnLevel
	default:
		return zapcore.ErrorLevel
	}
}

// slogCore is a zap core that writes into an slog.Handler, so that etcd's
// logs join the service's. Field keys are turned into snake_case
// ("local-member-id" becomes "local_member_id"); the logger name, if any,
// becomes the attribute "logger".
type slogCore struct {
	h       slog.Handler
	enabled zapcore.LevelEnabler
}

func (c *slogCore) Enabled(l zapcore.Level) bool { return c.enabled.Enabled(l) }

func (c *slogCore) With(fields []zapcore.Field) zapcore.Core {
	return &slogCore{h: c.h.WithAttrs(attrs(fields)), enabled: c.enabled}
}

func (c *slogCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *slogCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	level := slogLevel(e.Level)
	// checked again: the level may have been raised (or the server begun
	// to stop) since Check let the entry through
	if !c.enabled.Enabled(e.Level) || !c.h.Enabled(context.Background(), level) {
		return nil
	}
	r := slog.NewRecord(e.Time, level, e.Message, 0)
	if e.LoggerName != "" {
		r.AddAttrs(slog.String("logger", e.LoggerName))
	}
	r.AddAttrs(attrs(fields)...)
	return c.h.Handle(context.Background(), r)
}

func (c *slogCore) Sync() error { return nil }

// attrs converts zap fields into slog attributes, sorted by key.
func attrs(fields []zapcore.Field) []slog.Attr {
	if len(fields) == 0 {
		return nil
	}
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range fields {
		f.AddTo(enc)
	}
	out := make([]slog.Attr, 0, len(enc.Fields))
	for _, k := range slices.Sorted(maps.Keys(enc.Fields)) {
		out = append(out, slog.Any(snakeCase(k), enc.Fields[k]))
	}
	return out
}

var snakeCaser = strings.NewReplacer("-", "_", " ", "_")

func snakeCase(k string) string { return snakeCaser.Replace(k) }
