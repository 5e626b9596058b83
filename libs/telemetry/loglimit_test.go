package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// clock is a settable time source.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// lines decodes the JSON lines a logger wrote.
func lines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

func TestLogLimiter(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	l := LogLimiter{Every: time.Hour, Now: c.now}
	if ok, n := l.Allow(); !ok || n != 0 {
		t.Fatalf("first: %v %d", ok, n)
	}
	for range 3 {
		if ok, _ := l.Allow(); ok {
			t.Fatal("let through within the interval")
		}
	}
	c.add(time.Hour)
	if ok, n := l.Allow(); !ok || n != 3 {
		t.Fatalf("after the interval: %v, %d suppressed, want 3", ok, n)
	}
}

// 199 failures in 15 s with a 5 s interval: the first, then one line per
// interval with the count held back, then one Info line on recovery.
func TestFailureLog(t *testing.T) {
	var buf bytes.Buffer
	c := &clock{t: time.Unix(1000, 0)}
	f := &FailureLog{Log: slog.New(slog.NewJSONHandler(&buf, nil)), Every: 5 * time.Second, Now: c.now}
	ctx := context.Background()
	f.Succeeded(ctx, "recovered") // nothing failed: no line
	for i := range 199 {
		f.Failed(ctx, "down", slog.Int("i", i))
		c.add(15 * time.Second / 199)
	}
	if !f.Failing() {
		t.Fatal("not failing after failures")
	}
	f.Succeeded(ctx, "recovered")
	f.Succeeded(ctx, "recovered") // once only
	got := lines(t, &buf)
	if len(got) != 4 { // first + 2 interval lines (past 5 s, past 10 s) + recovery
		t.Fatalf("%d lines, want 4:\n%s", len(got), buf.String())
	}
	if got[0]["level"] != "WARN" || got[0]["i"] != 0.0 || got[0]["suppressed"] != nil {
		t.Errorf("first line %v", got[0])
	}
	total := 1
	for _, l := range got[1:3] {
		if l["level"] != "WARN" || l["suppressed"] == nil {
			t.Errorf("interval line %v", l)
			continue
		}
		total += 1 + int(l["suppressed"].(float64))
	}
	last := got[3]
	if last["level"] != "INFO" || last["msg"] != "recovered" || last["failures"] != 199.0 {
		t.Errorf("recovery line %v", last)
	}
	// The lines account for every failure but those held back after the
	// last interval line.
	if total > 199 || total < 199-int(5*time.Second/(15*time.Second/199)) {
		t.Errorf("lines account for %d of 199 failures", total)
	}

	// A new outage logs its first failure at once.
	buf.Reset()
	f.Failed(ctx, "down again")
	if got := lines(t, &buf); len(got) != 1 || got[0]["msg"] != "down again" {
		t.Errorf("new outage: %v", got)
	}
}

func TestFailureLogConcurrent(t *testing.T) {
	var buf syncBuffer
	f := &FailureLog{Log: slog.New(slog.NewJSONHandler(&buf, nil)), Every: time.Hour}
	ctx := context.Background()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				f.Failed(ctx, "down")
			}
		})
	}
	wg.Wait()
	for range 8 {
		wg.Go(func() { f.Succeeded(ctx, "up") })
	}
	wg.Wait()
	got := lines(t, &buf.b)
	if len(got) != 2 || got[1]["failures"] != 800.0 {
		t.Errorf("lines %v", got)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
