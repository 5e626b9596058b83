package scheduling_test

import (
	"strings"
	"testing"

	"github.com/hermod/hermod/libs/scheduling"
)

// A config is its own document; a values file's config block (a mapping
// or a YAML string) is taken out of it.
func TestConfigDocument(t *testing.T) {
	for in, want := range map[string]string{
		"plugins: [{type: queue-scorer}]\n":                               "plugins: [{type: queue-scorer}]\n",
		"replicaCount: 1\nconfig:\n  plugins:\n  - type: queue-scorer\n":  "plugins:\n  - type: queue-scorer\n",
		"config: |\n  plugins: [{type: queue-scorer}]\nreplicaCount: 1\n": "plugins: [{type: queue-scorer}]\n",
	} {
		got, err := scheduling.ConfigDocument([]byte(in))
		if err != nil || strings.TrimSpace(string(got)) != strings.TrimSpace(want) {
			t.Errorf("%q: got %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := scheduling.ConfigDocument([]byte("plugins: [")); err == nil {
		t.Error("malformed YAML: no error")
	}
}
