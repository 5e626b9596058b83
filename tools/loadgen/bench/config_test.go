package bench

import (
	"io"
	"log/slog"
	"testing"

	_ "github.com/hermod/hermod/libs/plugins/standard" // every plugin type
	"github.com/hermod/hermod/libs/scheduling"
)

// The benchmark's configurations load in the picker's scheduler.
func TestConfigsBuild(t *testing.T) {
	for _, name := range []string{"round-robin", "load-aware"} {
		text, err := Config(name)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := scheduling.ParseConfig([]byte(text))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		s, err := scheduling.New(cfg, scheduling.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		_ = s.Close()
	}
}
