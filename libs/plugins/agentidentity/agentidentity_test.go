package agentidentity

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

func TestResolveTakesTheFirstSessionHeader(t *testing.T) {
	p, err := Parse(json.RawMessage(`{"additionalSessionHeaders": ["X-My-Agent-Session"]}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	h.Set("Session-Id", "codex-1")
	h.Set("X-Claude-Code-Session-Id", "claude-7")
	if got := Resolve(p.Headers(), h.Get); got != "claude-7" {
		t.Errorf("Claude Code's header comes before Codex's: %q", got)
	}
	h.Set("X-My-Agent-Session", "mine")
	if got := Resolve(p.Headers(), h.Get); got != "mine" {
		t.Errorf("an additional header comes first: %q", got)
	}
	if got := Resolve(p.Headers(), http.Header{"Session_id": {"legacy"}}.Get); got != "legacy" {
		t.Errorf("Codex's underscored header: %q", got)
	}
	if got := Resolve(p.Headers(), http.Header{"X-Session-Affinity": {"  "}}.Get); got != "" {
		t.Errorf("a blank header is no identity: %q", got)
	}
}

func TestParseErrors(t *testing.T) {
	for params, want := range map[string]string{
		`{"additionalSessionHeaders": ["bad header"]}`:                          "is not a header name",
		`{"additionalSessionHeaders": [""]}`:                                    "is not a header name",
		`{"additionalSessionHeaders": "x"}`:                                     "additionalSessionHeaders",
		`{"additionalSessionHeaders": [` + strings.Repeat(`"h",`, 32) + `"h"]}`: "at most 32",
	} {
		if _, err := Parse(json.RawMessage(params), nil); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", params, err, want)
		}
	}
}
