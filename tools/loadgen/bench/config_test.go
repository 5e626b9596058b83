package bench

import (
	"io"
	"log/slog"
	"testing"

	"github.com/hermod/hermod/libs/plugins/standard" // every plugin type
	"github.com/hermod/hermod/libs/scheduling"
)

// The benchmark's configurations load in the picker's scheduler.
func TestConfigsBuild(t *testing.T) {
	for _, name := range append([]string{"round-robin", "load-aware"}, PrefixPolicies...) {
		text, err := Config(name)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := scheduling.ParseConfig([]byte(text))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		s, err := scheduling.New(cfg, append(standard.ValidationOptions(), scheduling.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))...)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		_ = s.Close()
	}
}
