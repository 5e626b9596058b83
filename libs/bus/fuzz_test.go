package bus

import (
	"strings"
	"testing"
)

// FuzzEscapeToken checks both directions of the subject-token escaping: a
// name escapes into a valid token that unescapes to the name, and a token
// that unescapes is the escaping of what it unescapes to (one token per
// name).
func FuzzEscapeToken(f *testing.F) {
	for _, s := range []string{"default", "10.0.0.5:8000", "a*b>c", "50%", "%2E", "x y\t", "ünï", "%41", "%2e", "a.b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tok := EscapeToken(s)
		if s != "" {
			if strings.ContainsAny(tok, ".*> \t\r\n\f\v") {
				t.Fatalf("EscapeToken(%q) = %q holds a byte a token may not", s, tok)
			}
			for i := 0; i < len(tok); i++ {
				if tok[i] < ' ' || tok[i] == 0x7f {
					t.Fatalf("EscapeToken(%q) = %q holds a control byte", s, tok)
				}
			}
			back, err := UnescapeToken(tok)
			if err != nil || back != s {
				t.Fatalf("UnescapeToken(EscapeToken(%q)) = %q, %v", s, back, err)
			}
			subj, err := MetricsSubject(s, s)
			if err != nil {
				t.Fatal(err)
			}
			p, e, err := ParseMetricsSubject(subj)
			if err != nil || p != s || e != s {
				t.Fatalf("ParseMetricsSubject(%q) = %q, %q, %v", subj, p, e, err)
			}
		}
		if name, err := UnescapeToken(s); err == nil {
			if again := EscapeToken(name); again != s {
				t.Fatalf("UnescapeToken(%q) = %q, which escapes to %q", s, name, again)
			}
		}
	})
}

// FuzzMetricsKey checks that metrics keys are valid KV keys and parse back,
// and that a key that parses is the one MetricsKey builds.
func FuzzMetricsKey(f *testing.F) {
	f.Add("default", "vllm-0")
	f.Add("pool.a", "10.0.0.5:8000")
	f.Add("a=b", "=3D")
	f.Add("p", "ü")
	f.Fuzz(func(t *testing.T, pool, ep string) {
		if pool != "" && ep != "" {
			key, err := MetricsKey(pool, ep)
			if err != nil {
				t.Fatal(err)
			}
			if !validKVKey(key) {
				t.Fatalf("MetricsKey(%q, %q) = %q: not a valid KV key", pool, ep, key)
			}
			p, e, err := ParseMetricsKey(key)
			if err != nil || p != pool || e != ep {
				t.Fatalf("ParseMetricsKey(%q) = %q, %q, %v", key, p, e, err)
			}
		}
		key := pool + "." + ep
		if p, e, err := ParseMetricsKey(key); err == nil {
			if again, _ := MetricsKey(p, e); again != key {
				t.Fatalf("ParseMetricsKey(%q) = %q, %q, which build %q", key, p, e, again)
			}
		}
	})
}
