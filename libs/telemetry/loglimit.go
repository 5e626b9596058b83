package telemetry

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultLogInterval is the least time between two lines of one
// rate-limited condition, unless told otherwise.
const DefaultLogInterval = 10 * time.Second

// LogLimiter lets through one log line per interval and counts the ones it
// held back. The zero value lets every line through; set Every. It is safe
// for concurrent use.
type LogLimiter struct {
	// Every is the least time between two lines let through.
	Every time.Duration
	// Now is the clock (nil: time.Now); tests set it.
	Now func() time.Time

	mu         sync.Mutex
	last       time.Time
	suppressed int
}

// Allow says whether to log now and, when it does, how many lines were held
// back since the last one it let through.
func (l *LogLimiter) Allow() (ok bool, suppressed int) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.last.IsZero() && now.Sub(l.last) < l.Every {
		l.suppressed++
		return false, 0
	}
	l.last = now
	suppressed, l.suppressed = l.suppressed, 0
	return true, suppressed
}

func (l *LogLimiter) now() time.Time {
	if l.Now != nil {
		return l.Now()
	}
	return time.Now()
}

// FailureLog logs a failure that repeats (a dependency that is down, called
// once per request) without one line per failure: the first failure is
// logged at once, then at most one line per Every, each with the count of
// failures held back since the previous line ("suppressed"); the first
// success after failures logs one Info line with the outage's failure count
// and duration. Succeeded costs one atomic load while nothing fails, so it
// fits a hot path. It is safe for concurrent use.
type FailureLog struct {
	// Log receives the lines (nil: slog.Default()).
	Log *slog.Logger
	// Every is the least time between two failure lines (0:
	// DefaultLogInterval).
	Every time.Duration
	// Now is the clock (nil: time.Now); tests set it.
	Now func() time.Time

	failing atomic.Bool

	mu       sync.Mutex
	since    time.Time // first failure of the outage
	last     time.Time // last failure line
	held     int       // failures held back since the last line
	failures int       // failures in the outage
}

// Failed records a failure and logs it at Warn level with attrs when the
// interval allows. The line carries "suppressed" (failures held back since
// the previous line) after the first one.
func (f *FailureLog) Failed(ctx context.Context, msg string, attrs ...slog.Attr) {
	now := f.now()
	f.mu.Lock()
	f.failures++
	first := !f.failing.Load()
	if first {
		f.failing.Store(true)
		f.since = now
	} else if now.Sub(f.last) < f.every() {
		f.held++
		f.mu.Unlock()
		return
	}
	held, failures, since := f.held, f.failures, f.since
	f.last, f.held = now, 0
	f.mu.Unlock()
	if !first {
		attrs = append(attrs, slog.Int("suppressed", held), slog.Int("failures", failures),
			slog.Duration("failing_for", now.Sub(since)))
	}
	f.logger().LogAttrs(ctx, slog.LevelWarn, msg, attrs...)
}

// Succeeded records a success; after failures it logs msg once at Info
// level with attrs, the outage's failure count and its duration.
func (f *FailureLog) Succeeded(ctx context.Context, msg string, attrs ...slog.Attr) {
	if !f.failing.Load() {
		return
	}
	now := f.now()
	f.mu.Lock()
	if !f.failing.Load() { // another caller logged the recovery
		f.mu.Unlock()
		return
	}
	f.failing.Store(false)
	failures, since := f.failures, f.since
	f.failures, f.held = 0, 0
	f.mu.Unlock()
	attrs = append(attrs, slog.Int("failures", failures), slog.Duration("failed_for", now.Sub(since)))
	f.logger().LogAttrs(ctx, slog.LevelInfo, msg, attrs...)
}

// Failing says whether the last outcome recorded was a failure.
func (f *FailureLog) Failing() bool { return f.failing.Load() }

func (f *FailureLog) every() time.Duration {
	if f.Every > 0 {
		return f.Every
	}
	return DefaultLogInterval
}

func (f *FailureLog) now() time.Time {
	if f.Now != nil {
		return f.Now()
	}
	return time.Now()
}

func (f *FailureLog) logger() *slog.Logger {
	if f.Log != nil {
		return f.Log
	}
	return slog.Default()
}
