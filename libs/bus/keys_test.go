package bus

import (
	"errors"
	"regexp"
	"strings"
	"testing"
)

// kvKeyRe is what the jetstream client accepts as a KV key.
var kvKeyRe = regexp.MustCompile(`^[-/_=\.a-zA-Z0-9]+$`)

func validKVKey(k string) bool {
	return kvKeyRe.MatchString(k) && !strings.HasPrefix(k, ".") && !strings.HasSuffix(k, ".") && !strings.Contains(k, "..")
}

func TestMetricsKey(t *testing.T) {
	for _, tc := range []struct{ pool, ep, want string }{
		{"default", "vllm-0", "default.vllm-0"},
		{"pool.a", "10.0.0.5:8000", "pool=2Ea.10=2E0=2E0=2E5=3A8000"},
		{"a=b", "x%y", "a=3Db.x=25y"},
		{"p", "ü", "p.=C3=BC"},
		{"p", "a/b_c-d", "p.a/b_c-d"},
	} {
		got, err := MetricsKey(tc.pool, tc.ep)
		if err != nil || got != tc.want {
			t.Errorf("MetricsKey(%q, %q) = %q, %v, want %q", tc.pool, tc.ep, got, err, tc.want)
			continue
		}
		if !validKVKey(got) {
			t.Errorf("MetricsKey(%q, %q) = %q: not a valid KV key", tc.pool, tc.ep, got)
		}
		p, e, err := ParseMetricsKey(got)
		if err != nil || p != tc.pool || e != tc.ep {
			t.Errorf("ParseMetricsKey(%q) = %q, %q, %v", got, p, e, err)
		}
	}
	if got, err := MetricsKeyFilter("pool.a"); err != nil || got != "pool=2Ea.*" {
		t.Errorf("MetricsKeyFilter = %q, %v", got, err)
	}
}

func TestParseMetricsKeyRejects(t *testing.T) {
	for _, key := range []string{"", "p", "p.", ".e", "p.e.x", "p.e:1", "p.=3a", "p.=41", "p.=2"} {
		if p, e, err := ParseMetricsKey(key); !errors.Is(err, ErrInvalidToken) {
			t.Errorf("ParseMetricsKey(%q) = %q, %q, %v, want ErrInvalidToken", key, p, e, err)
		}
	}
}
