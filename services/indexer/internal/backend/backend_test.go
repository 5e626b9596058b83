package backend

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReferenceBackends(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Resolved
	}{
		{`{"inMemoryConfig": {"size": 100000000, "podCacheSize": 10}}`, Resolved{Size: 100000000, PodCacheSize: 10}},
		{"costAwareMemoryConfig:\n  size: 500MiB\n", Resolved{MaxBytes: 500 << 20}},
		{"costAwareMemoryConfig: {}\nenableMetrics: true\nmetricsLoggingInterval: 10s\n", Resolved{MaxBytes: 2 << 30, LogInterval: 10e9}},
		{`{"redisConfig": {}}`, Resolved{RedisURL: DefaultRedisAddress}},
		{`{"valkeyConfig": {"address": "valkey://valkey.kv.svc:6379", "backendType": "valkey"}}`, Resolved{RedisURL: "valkey://valkey.kv.svc:6379"}},
	} {
		c, err := Parse([]byte(tc.in))
		if err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		got, err := c.Resolve()
		if err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		if got.Size != tc.want.Size || got.PodCacheSize != tc.want.PodCacheSize || got.MaxBytes != tc.want.MaxBytes || got.RedisURL != tc.want.RedisURL || got.LogInterval != tc.want.LogInterval {
			t.Fatalf("%s: %+v, want %+v", tc.in, got, tc.want)
		}
	}
}

func TestBadConfigsNameTheField(t *testing.T) {
	for in, want := range map[string]string{
		`{}`: "configure one backend",
		`{"inMemoryConfig": {}, "redisConfig": {}}`:                 "exactly one backend (got inMemoryConfig, redisConfig)",
		`{"inMemoryConfig": {"sise": 1}}`:                           `unknown field "sise"`,
		`{"costAwareMemoryConfig": {"size": "lots"}}`:               "costAwareMemoryConfig.size",
		`{"redisConfig": {"address": "http://x:1"}}`:                "redisConfig.address",
		`{"valkeyConfig": {"backendType": "memcached"}}`:            "valkeyConfig.backendType",
		`{"redisConfig": {"enableRDMA": true}}`:                     "redisConfig.enableRDMA",
		`{"inMemoryConfig": {"podCacheSize": 300}}`:                 "inMemoryConfig.podCacheSize",
		`{"inMemoryConfig": {}, "metricsLoggingInterval": "often"}`: "metricsLoggingInterval",
		"inMemoryConfig: [":                                         "kvBlockIndexConfig",
	} {
		c, err := Parse([]byte(in))
		if err == nil {
			_, err = c.Resolve()
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("%s: error %v, want one naming %q", in, err, want)
		}
	}
}

func TestReadFromAFile(t *testing.T) {
	name := filepath.Join(t.TempDir(), "index.yaml")
	if err := os.WriteFile(name, []byte("valkeyConfig:\n  address: valkey://127.0.0.1:6380\n  backendType: valkey\n  enableRDMA: true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := Read("@" + name)
	if err != nil || r.RedisURL != "valkey://127.0.0.1:6380" || len(r.Warnings) != 1 {
		t.Fatalf("%+v, %v", r, err)
	}
	if _, err := Read("@" + name + ".missing"); err == nil {
		t.Fatal("a missing file read")
	}
}

// FuzzParse: any input parses or fails with an error, and whatever
// parses resolves or fails with an error naming kvBlockIndexConfig's
// fields; nothing panics.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{"inMemoryConfig": {"size": 100000000, "podCacheSize": 10}}`,
		"costAwareMemoryConfig:\n  size: 2GiB\n",
		`{"valkeyConfig": {"address": "valkey://v:6379", "backendType": "valkey", "enableRDMA": true}}`,
		`{"redisConfig": {"address": "unix:///run/redis.sock"}, "metricsLoggingInterval": "10s"}`,
		"", "[]", "{", "inMemoryConfig: !!binary AAAA",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data)
		if err != nil {
			return
		}
		r, err := c.Resolve()
		if err == nil && r.RedisURL == "" && c.Redis == nil && c.Valkey == nil && r.MaxBytes < 0 {
			t.Fatalf("negative bound %+v", r)
		}
	})
}
