package openai

import (
	"encoding/json"
	"strings"
	"testing"
)

// A stream that ends with [DONE] is Done; one that breaks off is not, and
// Broken drops its incomplete last event and passes an OpenAI error event.
func TestAccountantBroken(t *testing.T) {
	chunk := "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n"
	cases := []struct {
		name     string
		body     string
		done     bool
		skipping bool
	}{
		{"whole", chunk + "data: [DONE]\n\n", true, false},
		{"[DONE] without its blank line", chunk + "data: [DONE]", true, false},
		{"ends between events", chunk, false, false},
		{"ends inside an event", chunk + "data: {\"choices\":[{\"del", false, false},
		{"ends inside an over-long event", chunk + "data: \"" + strings.Repeat("x", MaxEventBytes+10), false, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := NewAccountant(true, false)
			passed := string(a.Feed([]byte(c.body)))
			tail := a.Finish()
			if got := a.Observed().Done; got != c.done {
				t.Fatalf("Done = %v, want %v", got, c.done)
			}
			if c.done {
				return
			}
			ev := string(a.Broken(&Error{Status: 502, Code: "stream_interrupted", Message: "the stream broke off"}))
			if !c.skipping && !strings.HasSuffix(passed, "\n\n") {
				t.Errorf("an incomplete event was passed on: %.200q", passed)
			}
			_ = tail // what Finish returned is not passed on for a broken stream
			if c.skipping != strings.HasPrefix(ev, "\n\n") {
				t.Errorf("error event %q: an over-long event must be ended first", ev)
			}
			data, ok := strings.CutPrefix(strings.TrimPrefix(ev, "\n\n"), "data: ")
			if !ok || !strings.HasSuffix(data, "\n\n") {
				t.Fatalf("error event %q is not one SSE data event", ev)
			}
			var v struct {
				Error struct {
					Message, Type string
					Code          *string
				}
			}
			if err := json.Unmarshal([]byte(data), &v); err != nil || v.Error.Type != TypeServer || v.Error.Code == nil || *v.Error.Code != "stream_interrupted" {
				t.Fatalf("error event %q: %+v %v", ev, v, err)
			}
		})
	}
}
