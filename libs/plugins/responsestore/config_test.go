package responsestore

import (
	"strings"
	"testing"
	"time"

	"github.com/hermod/hermod/libs/scheduling"
)

func TestDefaultsWithoutStoreConfig(t *testing.T) {
	for _, raw := range []string{"", "null"} {
		c, err := ParseStoreConfig([]byte(raw), nil)
		if err != nil {
			t.Fatal(err)
		}
		m := c.InMemoryConfig
		if c.TieredConfig != nil || m == nil || m.TTL.Std() != 24*time.Hour || m.MaxEntries != 10000 || m.MaxEntryBytes != 1048576 {
			t.Fatalf("%q: %+v %+v", raw, c, m)
		}
	}
}

func TestEveryKeyParses(t *testing.T) {
	mem, err := ParseStoreConfig([]byte(`{"inMemoryConfig":{"ttl":"2h","maxEntries":5,"maxEntryBytes":99}}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if m := mem.InMemoryConfig; m.TTL.Std() != 2*time.Hour || m.MaxEntries != 5 || m.MaxEntryBytes != 99 {
		t.Fatalf("%+v", m)
	}
	c, err := ParseStoreConfig([]byte(`{"inMemoryConfig":{"ttl":"1h"},"tieredConfig":{
		"redis":{"addresses":["s1:26379","s2:26379"],"masterName":"mymaster","username":"u","passwordEnv":"P","db":2,"ttl":"3h","maxEntryBytes":77},
		"mongo":{"uri":"mongodb://m:27017","database":"db","collection":"coll","ttl":"48h","timeout":"250ms"},
		"stream":{"key":"k:s","consumerGroup":"g","maxLen":500,"batchSize":7,"blockTimeout":"2s","claimAge":"1m"}}}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.InMemoryConfig != nil {
		t.Fatal("tieredConfig takes precedence over inMemoryConfig")
	}
	r, m, s := c.TieredConfig.Redis, c.TieredConfig.Mongo, c.TieredConfig.Stream
	if r.Mode() != Sentinel || r.MasterName != "mymaster" || r.Username != "u" || r.PasswordEnv != "P" || r.DB != 2 || r.TTL.Std() != 3*time.Hour || r.MaxEntryBytes != 77 {
		t.Fatalf("redis %+v", r)
	}
	if m.URI != "mongodb://m:27017" || m.Database != "db" || m.Collection != "coll" || m.TTL.Std() != 48*time.Hour || m.Timeout.Std() != 250*time.Millisecond {
		t.Fatalf("mongo %+v", m)
	}
	if s.Key != "k:s" || s.ConsumerGroup != "g" || s.MaxLen != 500 || s.BatchSize != 7 || s.BlockTimeout.Std() != 2*time.Second || s.ClaimAge.Std() != time.Minute {
		t.Fatalf("stream %+v", s)
	}
}

func TestTieredDefaultsAndModes(t *testing.T) {
	c, err := ParseStoreConfig([]byte(`{"tieredConfig":{"redis":{"address":"valkey://v:6379"},"mongo":{"uri":"mongodb://m"}}}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	r, m, s := c.TieredConfig.Redis, c.TieredConfig.Mongo, c.TieredConfig.Stream
	if r.Mode() != Standalone || r.TTL.Std() != 24*time.Hour || r.MaxEntryBytes != 1048576 {
		t.Fatalf("redis %+v", r)
	}
	if m.Database != "heimdall" || m.Collection != "responses" || m.TTL.Std() != 720*time.Hour || m.Timeout.Std() != 500*time.Millisecond {
		t.Fatalf("mongo %+v", m)
	}
	if s.Key != "heimdall:responses:mongo_sync" || s.ConsumerGroup != "mongo-sync" || s.MaxLen != 1000000 || s.BatchSize != 100 || s.BlockTimeout.Std() != time.Second || s.ClaimAge.Std() != 30*time.Second {
		t.Fatalf("stream %+v", s)
	}
	cl, err := ParseStoreConfig([]byte(`{"tieredConfig":{"redis":{"addresses":["a:1","b:2","c:3"]}}}`), nil)
	if err != nil || cl.TieredConfig.Redis.Mode() != Cluster || cl.TieredConfig.Mongo != nil {
		t.Fatalf("cluster: %v", err)
	}
}

func TestErrorsNameTheField(t *testing.T) {
	for raw, field := range map[string]string{
		`{}`:                            "parameters.storeConfig",
		`{"tieredConfig":{}}`:           "tieredConfig.redis",
		`{"tieredConfig":{"redis":{}}}`: "redis.address",
		`{"tieredConfig":{"redis":{"address":"redis://a:1","addresses":["b:2"]}}}`:                                   "redis.address",
		`{"tieredConfig":{"redis":{"address":"http://a:1"}}}`:                                                        "redis.address",
		`{"tieredConfig":{"redis":{"addresses":["nope"]}}}`:                                                          "redis.addresses[0]",
		`{"tieredConfig":{"redis":{"address":"redis://a:1","masterName":"m"}}}`:                                      "redis.masterName",
		`{"tieredConfig":{"redis":{"addresses":["a:1","b:2"],"db":1}}}`:                                              "redis.db",
		`{"tieredConfig":{"redis":{"address":"redis://a:1","ttl":"-1s"}}}`:                                           "redis.ttl",
		`{"tieredConfig":{"redis":{"address":"redis://a:1","ttl":"soon"}}}`:                                          "redis.ttl",
		`{"tieredConfig":{"redis":{"address":"redis://a:1","maxEntryBytes":-1}}}`:                                    "redis.maxEntryBytes",
		`{"tieredConfig":{"redis":{"address":"redis://a:1"},"mongo":{}}}`:                                            "mongo.uri",
		`{"tieredConfig":{"redis":{"address":"redis://a:1"},"mongo":{"uri":"x://"}}}`:                                "mongo.uri",
		`{"tieredConfig":{"redis":{"address":"redis://a:1"},"mongo":{"uri":"mongodb://m","database":"a.b"}}}`:        "mongo.database",
		`{"tieredConfig":{"redis":{"address":"redis://a:1"},"mongo":{"uri":"mongodb://m","collection":"system.x"}}}`: "mongo.collection",
		`{"tieredConfig":{"redis":{"address":"redis://a:1"},"mongo":{"uri":"mongodb://m","timeout":"-1s"}}}`:         "mongo.timeout",
		`{"tieredConfig":{"redis":{"address":"redis://a:1"},"stream":{"key":"{x}"}}}`:                                "stream.key",
		`{"tieredConfig":{"redis":{"address":"redis://a:1"},"stream":{"batchSize":-1}}}`:                             "stream.batchSize",
		`{"tieredConfig":{"redis":{"address":"redis://a:1"},"stream":{"maxLen":-1}}}`:                                "stream.maxLen",
		`{"tieredConfig":{"redis":{"address":"redis://a:1"},"stream":{"claimAge":"-1s"}}}`:                           "stream.claimAge",
		`{"tieredConfig":{"redis":{"address":"redis://a:1"},"stream":{"blockTimeout":"-1s"}}}`:                       "stream.blockTimeout",
		`{"inMemoryConfig":{"maxEntries":-1}}`:                                                                       "inMemoryConfig.maxEntries",
		`{"inMemoryConfig":{"maxEntries":"many"}}`:                                                                   "inMemoryConfig.maxEntries",
	} {
		_, err := ParseStoreConfig([]byte(raw), nil)
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: %v, want an error naming %s", raw, err, field)
		}
	}
}

func TestThePluginLoadsInAPickerConfigWithItsGate(t *testing.T) {
	yaml := `apiVersion: inference.networking.x-k8s.io/v1alpha1
kind: EndpointPickerConfig
featureGates: [prepareDataPlugins]
plugins:
- type: responses-store
  parameters:
    storeConfig:
      tieredConfig:
        redis:
          address: redis://redis.responses-store.svc:6379
          ttl: 24h
        mongo:
          uri: mongodb://mongo.responses-store.svc:27017
        stream:
          claimAge: 30s
- type: max-score-picker
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: max-score-picker
`
	cfg, err := scheduling.ParseConfig([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	raw, ok := FromConfig(cfg)
	if !ok {
		t.Fatal("no responses-store plugin found")
	}
	c, err := ParseParams(raw, nil)
	if err != nil || c.TieredConfig.Redis.Address != "redis://redis.responses-store.svc:6379" || c.TieredConfig.Mongo.Database != "heimdall" {
		t.Fatalf("%+v %v", c, err)
	}
}

// Hermod's security keys beside reference/001's: password sources, tls
// blocks, mongo credentials.
func TestSecurityKeysParse(t *testing.T) {
	c, err := ParseStoreConfig([]byte(`{"tieredConfig":{
		"redis":{"address":"rediss://r:6380","username":"hermod","passwordFile":"/run/secrets/redis",
			"tls":{"caFile":"/ca.pem","certFile":"/c.pem","keyFile":"/k.pem","serverName":"redis.internal"}},
		"mongo":{"uri":"mongodb://m:27017/?authSource=admin","username":"hermod","passwordEnv":"MONGO_PASSWORD",
			"tls":{"caFile":"/ca.pem","certFile":"/c.pem","keyFile":"/k.pem"}}}}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	r, m := c.TieredConfig.Redis, c.TieredConfig.Mongo
	if r.PasswordFile != "/run/secrets/redis" || r.TLS == nil || r.TLS.CAFile != "/ca.pem" || r.TLS.ServerName != "redis.internal" || r.TLS.KeyFile != "/k.pem" {
		t.Fatalf("redis %+v tls %+v", r, r.TLS)
	}
	if m.Username != "hermod" || m.PasswordEnv != "MONGO_PASSWORD" || m.TLS == nil || m.TLS.CertFile != "/c.pem" {
		t.Fatalf("mongo %+v", m)
	}
}

func TestSecurityKeysErrors(t *testing.T) {
	for _, tc := range []struct{ raw, field, not string }{
		{`{"tieredConfig":{"redis":{"address":"redis://a:1","password":"p"}}}`, "redis.password", ""},
		{`{"tieredConfig":{"redis":{"address":"redis://:hunter2@a:1"}}}`, "redis.address", "hunter2"},
		{`{"tieredConfig":{"redis":{"address":"redis://a:1"},"mongo":{"uri":"mongodb://u:hunter2@m:27017/db"}}}`, "mongo.uri", "hunter2"},
		{`{"tieredConfig":{"redis":{"address":"redis://a:1"},"mongo":{"uri":"http://u:hunter2@m"}}}`, "mongo.uri", "hunter2"},
		{`{"tieredConfig":{"redis":{"address":"redis://a:1","passwordFile":"/f","passwordEnv":"E"}}}`, "redis.password", ""},
		{`{"tieredConfig":{"redis":{"address":"redis://a:1","passwordEnv":"s3cr3t value!"}}}`, "redis.passwordEnv", "s3cr3t"},
		{`{"tieredConfig":{"redis":{"address":"redis://a:1","tls":{"caFile":"/ca.pem"}}}}`, "redis.tls", ""},
		{`{"tieredConfig":{"redis":{"address":"rediss://a:1","tls":{"certFile":"/c.pem"}}}}`, "redis.tls", ""},
		{`{"tieredConfig":{"redis":{"address":"redis://a:1"},"mongo":{"uri":"mongodb://m","username":"u"}}}`, "mongo.username", ""},
		{`{"tieredConfig":{"redis":{"address":"redis://a:1"},"mongo":{"uri":"mongodb://m","username":"u","passwordFile":"/f","passwordEnv":"E"}}}`, "mongo.password", ""},
		{`{"tieredConfig":{"redis":{"address":"redis://a:1"},"mongo":{"uri":"mongodb://m","tls":{"keyFile":"/k.pem"}}}}`, "mongo.tls", ""},
	} {
		_, err := ParseStoreConfig([]byte(tc.raw), nil)
		if err == nil || !strings.Contains(err.Error(), tc.field) || (tc.not != "" && strings.Contains(err.Error(), tc.not)) {
			t.Errorf("%s: %v, want an error naming %s", tc.raw, err, tc.field)
		}
	}
	// There is no way to skip verification: the key is unknown (warned
	// about, like every unknown key) and changes nothing.
	var warnings []string
	c, err := ParseStoreConfig([]byte(`{"tieredConfig":{"redis":{"address":"rediss://a:1","tls":{"insecureSkipVerify":true}}}}`), func(w string) { warnings = append(warnings, w) })
	if err != nil || len(warnings) != 1 || !strings.Contains(warnings[0], "redis.tls.insecureSkipVerify: unknown") || c.TieredConfig.Redis.TLS.Set() {
		t.Errorf("insecureSkipVerify: %v %q", err, warnings)
	}
}
