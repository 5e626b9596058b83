package bench

import (
	"io"
	"log/slog"
	"testing"

	"github.com/hermod/hermod/libs/plugins/standard" // every plugin type
	"github.com/hermod/hermod/libs/scheduling"
)

// The benchmark's configurations (every one in configs/) load in the
// picker's scheduler.
func TestConfigsBuild(t *testing.T) {
	for _, name := range Configs() {
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
