package cli

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	registryv1 "github.com/hermod/hermod/libs/api/hermod/registry/v1"
	"github.com/hermod/hermod/libs/coord"
)

// config set warns when, against the pool's registered endpoints, a
// profile's filters leave no endpoint (every request it serves would be a
// 503), and refuses such a config with -strict.
func TestConfigSetWarnsWhenTheFiltersMatchNoEndpoint(t *testing.T) {
	s := newStores(t)
	for i, name := range []string{"pod-a", "pod-b"} {
		reg, err := coord.Register(context.Background(), s.cli, &registryv1.Endpoint{Name: name, Pool: s.pool, Address: "10.0.0.1", Port: int32(8000 + i),
			ServedModels: []string{"llama"}, Labels: map[string]string{"gpu": "h100"}}, 5*time.Second, coord.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = reg.Close(context.Background()) })
	}
	unmatched := writeFile(t, `plugins:
- {type: label-selector-filter, name: a100-only, parameters: {matchLabels: {gpu: a100}}}
- {type: queue-scorer}
`)
	out, errs, code := run(append(append([]string{"config", "set"}, s.flags("--wait", "0", "-strict")...), unmatched)...)
	if code != ExitFailure || !strings.Contains(errs, "nothing was written") || strings.Contains(out, "config written") {
		t.Errorf("-strict with a profile that matches nothing: %d %q %q", code, out, errs)
	}
	out, errs, code = run(append(append([]string{"config", "set"}, s.flags("--wait", "0")...), unmatched)...)
	want := `warning: profile "default": filter a100-only (label-selector-filter) matches none of the 2 registered endpoints of pool ` + s.pool
	if code != ExitOK || !strings.Contains(errs, want) || !strings.Contains(errs, "503 no_endpoint_matched") || !strings.Contains(out, "config written") {
		t.Errorf("a profile that matches nothing: %d %q %q, want a warning %q", code, out, errs, want)
	}
	matched := writeFile(t, `plugins:
- {type: label-selector-filter, name: h100-only, parameters: {matchLabels: {gpu: h100}}}
- {type: queue-scorer}
`)
	if _, errs, code := run(append(append([]string{"config", "set"}, s.flags("--wait", "0", "-strict")...), matched)...); code != ExitOK || strings.Contains(errs, "warning") {
		t.Errorf("a config that matches: %d %q", code, errs)
	}
	// Another pool with no endpoints: a note, no warning.
	if _, errs, code := run(append(append([]string{"config", "set"}, s.flags("--wait", "0", "--pool", s.pool+"-empty")...), unmatched)...); code != ExitOK || strings.Contains(errs, "warning") || !strings.Contains(errs, "no registered endpoints") {
		t.Errorf("a pool without endpoints: %d %q", code, errs)
	}
}
