package responses

import "testing"

func TestEventNames(t *testing.T) {
	for frame, want := range map[string]struct {
		name  string
		final bool
	}{
		"event: response.completed\ndata: {}\n\n":         {"response.completed", true},
		"event: response.incomplete\ndata: {}\n\n":        {"response.incomplete", true},
		"event: response.failed\ndata: {}\n\n":            {"response.failed", true},
		"event: response.output_text.delta\ndata: {}\n\n": {"response.output_text.delta", false},
		"event: response.completed.extra\ndata: {}\n\n":   {"response.completed.extra", false},
		"data: {\"type\":\"response.completed\"}\n\n":     {"", false},
		"": {"", false},
	} {
		if got := eventName([]byte(frame)); got != want.name || isFinal([]byte(frame)) != want.final {
			t.Errorf("%q: name %q final %v, want %q %v", frame, got, isFinal([]byte(frame)), want.name, want.final)
		}
	}
	if got := string(frameOf("response.failed", 7, map[string]any{"response": nil})); got != "event: response.failed\ndata: {\"response\":null,\"sequence_number\":7,\"type\":\"response.failed\"}\n\n" {
		t.Fatalf("frame %q", got)
	}
}
