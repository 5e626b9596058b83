package bus

import (
	"errors"
	"testing"
)

func TestEscapeToken(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"default", "default"},
		{"vllm-0_a:b/c=d", "vllm-0_a:b/c=d"},
		{"10.0.0.5:8000", "10%2E0%2E0%2E5:8000"},
		{"a*b>c", "a%2Ab%3Ec"},
		{"50%", "50%25"},
		{"%2E", "%252E"},
		{"a b\tc\nd\re", "a%20b%09c%0Ad%0De"},
		{"\x00\x1f\x7f", "%00%1F%7F"},
		{"pööl.ü", "pööl%2Eü"},
		{"[::1]:8000", "[::1]:8000"},
		{">", "%3E"},
	} {
		got := EscapeToken(tc.in)
		if got != tc.want {
			t.Errorf("EscapeToken(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if tc.in == "" {
			continue
		}
		back, err := UnescapeToken(got)
		if err != nil || back != tc.in {
			t.Errorf("UnescapeToken(%q) = %q, %v, want %q", got, back, err, tc.in)
		}
	}
}

func TestUnescapeTokenRejects(t *testing.T) {
	for _, tc := range []struct{ name, tok string }{
		{"empty", ""},
		{"dot", "a.b"},
		{"star", "a*"},
		{"gt", ">"},
		{"space", "a b"},
		{"tab", "a\tb"},
		{"control", "a\x01"},
		{"del", "a\x7f"},
		{"lone percent", "%"},
		{"truncated escape", "%2"},
		{"truncated escape at end", "ab%2"},
		{"lower-case hex", "%2e"},
		{"not hex", "%ZZ"},
		{"needless escape", "%41"},
		{"needless escape of colon", "%3A"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := UnescapeToken(tc.tok)
			if !errors.Is(err, ErrInvalidToken) {
				t.Fatalf("UnescapeToken(%q) = %q, %v, want ErrInvalidToken", tc.tok, got, err)
			}
		})
	}
}
