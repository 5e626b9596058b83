// Package telemetry holds the logging, metrics and tracing set-up every
// Hermod binary shares.
package telemetry

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
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
// errors). Services log JSON; tools may log text.
func NewLogger(w io.Writer, format LogFormat, v int) (*slog.Logger, error) {
	level := V(v)
	if v < 0 {
		level = slog.LevelWarn
	}
	opts := &slog.HandlerOptions{Level: level, ReplaceAttr: levelNames}
	switch LogFormat(strings.ToLower(string(format))) {
	case FormatJSON, "":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	case FormatText:
		return slog.New(slog.NewTextHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("log format %q: must be json or text", format)
}

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
