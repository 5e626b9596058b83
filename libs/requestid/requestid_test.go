package requestid

import (
	"strings"
	"testing"
)

func TestValid(t *testing.T) {
	for _, c := range []struct {
		id   string
		want bool
	}{
		{"", false},
		{"abc-123_XYZ.:/+=", true},
		{strings.Repeat("a", MaxLen), true},
		{strings.Repeat("a", MaxLen+1), false},
		{"has space", false},
		{"semi;colon", false},
		{"new\nline", false},
		{"ünïcode", false},
	} {
		if got := Valid(c.id); got != c.want {
			t.Errorf("Valid(%q) = %t, want %t", c.id, got, c.want)
		}
	}
}

func TestNew(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id := New()
		if len(id) != 32 || strings.Trim(id, "0123456789abcdef") != "" || !Valid(id) {
			t.Fatalf("New() = %q, want 32 lower-case hex digits", id)
		}
		if seen[id] {
			t.Fatalf("New() repeated %q", id)
		}
		seen[id] = true
	}
}
