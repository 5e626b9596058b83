package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
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
