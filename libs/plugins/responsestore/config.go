// Package responsestore is the responses-store plugin: the storeConfig of
// an EndpointPickerConfig, which selects and tunes the store behind the
// Responses API (/v1/responses). The store itself is the responses service;
// this package parses and validates its configuration, so that the picker
// (and hermodctl config validate) accept the plugin and the service reads
// the same keys, with the same defaults, as reference/001.
package responsestore

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/libs/tlsconfig"
)

// Type is the plugin's type name.
const Type = "responses-store"

// Defaults of the configuration keys (reference/001).
const (
	DefaultTTL           = 24 * time.Hour
	DefaultMaxEntries    = 10000
	DefaultMaxEntryBytes = 1 << 20
	DefaultMongoDatabase = "heimdall"
	DefaultMongoColl     = "responses"
	DefaultMongoTTL      = 720 * time.Hour
	DefaultMongoTimeout  = 500 * time.Millisecond
	DefaultStreamKey     = "heimdall:responses:mongo_sync"
	DefaultConsumerGroup = "mongo-sync"
	DefaultStreamMaxLen  = 1000000
	DefaultBatchSize     = 100
	DefaultBlockTimeout  = time.Second
	DefaultClaimAge      = 30 * time.Second
)

// Params are the plugin's parameters.
type Params struct {
	StoreConfig *StoreConfig `json:"storeConfig"`
}

// StoreConfig selects the backend: tieredConfig wins over inMemoryConfig;
// neither (storeConfig omitted) is memory with a 24h ttl.
type StoreConfig struct {
	InMemoryConfig *MemoryConfig `json:"inMemoryConfig,omitempty"`
	TieredConfig   *TieredConfig `json:"tieredConfig,omitempty"`
}

// MemoryConfig is the in-memory backend.
type MemoryConfig struct {
	TTL           scheduling.Duration `json:"ttl"`
	MaxEntries    int                 `json:"maxEntries"`
	MaxEntryBytes int                 `json:"maxEntryBytes"`
}

// TieredConfig is Redis/Valkey (tier 1) with an optional MongoDB tier 2
// kept in sync through a Redis stream.
type TieredConfig struct {
	Redis  *RedisConfig  `json:"redis"`
	Mongo  *MongoConfig  `json:"mongo"`
	Stream *StreamConfig `json:"stream"`
}

// RedisConfig is tier 1: a standalone server (Address), a Sentinel-managed
// master (Addresses with MasterName) or a Cluster (several Addresses).
//
// Beyond reference/001's keys, Hermod takes the password from a file
// (PasswordFile) or an environment variable (PasswordEnv) of the responses
// service, so that it is not stored in the config (which lives in etcd),
// and TLS files (TLS; a rediss:// or valkeys:// address uses TLS with the
// system's roots without them).
type RedisConfig struct {
	Address       string              `json:"address"`
	Addresses     []string            `json:"addresses"`
	MasterName    string              `json:"masterName"`
	Username      string              `json:"username"`
	Password      string              `json:"password"`
	PasswordFile  string              `json:"passwordFile,omitempty"`
	PasswordEnv   string              `json:"passwordEnv,omitempty"`
	TLS           *TLSConfig          `json:"tls,omitempty"`
	DB            int                 `json:"db"`
	TTL           scheduling.Duration `json:"ttl"`
	MaxEntryBytes int                 `json:"maxEntryBytes"`
}

// TLSConfig is a tls block: the CA file that verifies the server (empty:
// the system's roots), a client certificate and key for servers that ask
// for one (Redis' tls-auth-clients, MongoDB's requireTLS with a CA), and
// the name the server's certificate must carry (default: the host). There
// is no way to skip verification.
type TLSConfig = tlsconfig.ClientFiles

// Mode is how tier 1 is reached.
type Mode string

// The modes of RedisConfig.
const (
	Standalone Mode = "standalone"
	Sentinel   Mode = "sentinel"
	Cluster    Mode = "cluster"
)

// Mode reports how the configuration reaches the server.
func (r *RedisConfig) Mode() Mode {
	switch {
	case r.Address != "":
		return Standalone
	case r.MasterName != "":
		return Sentinel
	case len(r.Addresses) > 1:
		return Cluster
	default:
		return Standalone // one bare host:port
	}
}

// MongoConfig is tier 2. A user name and TLS may be in the URI
// (mongodb://user@host/?tls=true&tlsCAFile=...), a password may not (it
// would be stored with the config); Hermod adds Username with
// PasswordFile or PasswordEnv and a TLS block, which take precedence over
// the URI's.
type MongoConfig struct {
	URI          string              `json:"uri"`
	Database     string              `json:"database"`
	Collection   string              `json:"collection"`
	TTL          scheduling.Duration `json:"ttl"`
	Timeout      scheduling.Duration `json:"timeout"`
	Username     string              `json:"username,omitempty"`
	PasswordFile string              `json:"passwordFile,omitempty"`
	PasswordEnv  string              `json:"passwordEnv,omitempty"`
	TLS          *TLSConfig          `json:"tls,omitempty"`
}

// StreamConfig tunes the Redis-to-MongoDB sync.
type StreamConfig struct {
	Key           string              `json:"key"`
	ConsumerGroup string              `json:"consumerGroup"`
	MaxLen        int64               `json:"maxLen"`
	BatchSize     int                 `json:"batchSize"`
	BlockTimeout  scheduling.Duration `json:"blockTimeout"`
	ClaimAge      scheduling.Duration `json:"claimAge"`
}

// Default is the store used without storeConfig: memory, 24h.
func Default() *StoreConfig {
	c := &StoreConfig{InMemoryConfig: &MemoryConfig{}}
	c.InMemoryConfig.defaults()
	return c
}

// ParseStoreConfig decodes and validates a storeConfig object (JSON; nil
// or empty is the default), filling in defaults. Errors name the field
// under "parameters.storeConfig". warn (may be nil) receives warnings.
func ParseStoreConfig(raw json.RawMessage, warn func(string)) (*StoreConfig, error) {
	if len(raw) > 0 {
		wrapped, err := json.Marshal(map[string]json.RawMessage{"storeConfig": raw})
		if err != nil {
			return nil, err
		}
		raw = wrapped
	}
	return parseParams(raw, warner(warn))
}

// warnHandle is the part of scheduling.Handle the parser uses.
type warnHandle struct {
	scheduling.Handle
	warn func(string)
}

func (w warnHandle) Warn(msg string) { w.warn(msg) }

func warner(warn func(string)) scheduling.Handle {
	if warn == nil {
		return nil
	}
	return warnHandle{warn: warn}
}

func parseParams(raw json.RawMessage, h scheduling.Handle) (*StoreConfig, error) {
	var p Params
	if err := scheduling.DecodeParameters(raw, &p, h); err != nil {
		return nil, err
	}
	if p.StoreConfig == nil {
		return Default(), nil
	}
	c := p.StoreConfig
	switch {
	case c.TieredConfig != nil:
		if c.InMemoryConfig != nil && h != nil {
			h.Warn("parameters.storeConfig.inMemoryConfig: ignored, tieredConfig takes precedence")
		}
		c.InMemoryConfig = nil
		if err := c.TieredConfig.validate("storeConfig.tieredConfig"); err != nil {
			return nil, err
		}
	case c.InMemoryConfig != nil:
		c.InMemoryConfig.defaults()
		if err := c.InMemoryConfig.validate("storeConfig.inMemoryConfig"); err != nil {
			return nil, err
		}
	default:
		return nil, scheduling.ParamErrorf("storeConfig", "set inMemoryConfig or tieredConfig (or omit storeConfig for memory with a 24h ttl)")
	}
	return c, nil
}

func (m *MemoryConfig) defaults() {
	m.TTL = cmp.Or(m.TTL, scheduling.Duration(DefaultTTL))
	m.MaxEntries = cmp.Or(m.MaxEntries, DefaultMaxEntries)
	m.MaxEntryBytes = cmp.Or(m.MaxEntryBytes, DefaultMaxEntryBytes)
}

func (m *MemoryConfig) validate(path string) error {
	switch {
	case m.TTL < 0:
		return scheduling.ParamErrorf(path+".ttl", "must be positive (got %s)", m.TTL)
	case m.MaxEntries < 0:
		return scheduling.ParamErrorf(path+".maxEntries", "must be positive (got %d)", m.MaxEntries)
	case m.MaxEntryBytes < 0:
		return scheduling.ParamErrorf(path+".maxEntryBytes", "must be positive (got %d)", m.MaxEntryBytes)
	}
	return nil
}

func (t *TieredConfig) validate(path string) error {
	if t.Redis == nil {
		return scheduling.ParamErrorf(path+".redis", "required: the tiered backend stores in Redis/Valkey")
	}
	if err := t.Redis.validate(path + ".redis"); err != nil {
		return err
	}
	if t.Mongo != nil {
		if err := t.Mongo.validate(path + ".mongo"); err != nil {
			return err
		}
	}
	if t.Stream == nil {
		t.Stream = &StreamConfig{}
	}
	return t.Stream.validate(path + ".stream")
}

func (r *RedisConfig) validate(path string) error {
	r.TTL = cmp.Or(r.TTL, scheduling.Duration(DefaultTTL))
	r.MaxEntryBytes = cmp.Or(r.MaxEntryBytes, DefaultMaxEntryBytes)
	switch {
	case r.Address != "" && len(r.Addresses) > 0:
		return scheduling.ParamErrorf(path+".address", "address and addresses are mutually exclusive")
	case r.Address == "" && len(r.Addresses) == 0:
		return scheduling.ParamErrorf(path+".address", "required: a redis:// or valkey:// URL (or addresses)")
	case r.Address != "":
		u, err := url.Parse(r.Address)
		if err != nil || (u.Scheme != "redis" && u.Scheme != "rediss" && u.Scheme != "valkey" && u.Scheme != "valkeys") || u.Host == "" {
			return scheduling.ParamErrorf(path+".address", "want a redis://, rediss://, valkey:// or valkeys:// URL with a host") // not echoed: it may hold a secret
		}
		if _, ok := u.User.Password(); ok {
			return scheduling.ParamErrorf(path+".address", "a password in the URL would be stored with the configuration (in etcd) and shown by whatever prints it: give it in passwordFile or passwordEnv")
		}
		if r.MasterName != "" {
			return scheduling.ParamErrorf(path+".masterName", "Sentinel mode needs addresses (the sentinels), not address")
		}
		if r.TLS != nil && (u.Scheme == "redis" || u.Scheme == "valkey") {
			return scheduling.ParamErrorf(path+".tls", "set, but address %s://... is plain: use %ss://", u.Scheme, u.Scheme)
		}
	default:
		for i, a := range r.Addresses {
			if !validHostPort(a) {
				return scheduling.ParamErrorf(fmt.Sprintf("%s.addresses[%d]", path, i), "want host:port (got %q)", a)
			}
		}
	}
	if r.Password != "" {
		return scheduling.ParamErrorf(path+".password", "an inline password would be stored with the configuration (in etcd) and shown by whatever prints it: give it in passwordFile or passwordEnv")
	}
	if err := validateSecrets(path, r.PasswordFile, r.PasswordEnv, r.TLS); err != nil {
		return err
	}
	switch {
	case r.DB < 0:
		return scheduling.ParamErrorf(path+".db", "must not be negative (got %d)", r.DB)
	case r.DB != 0 && r.Mode() == Cluster:
		return scheduling.ParamErrorf(path+".db", "a Redis Cluster has only database 0 (got %d)", r.DB)
	case r.TTL < 0:
		return scheduling.ParamErrorf(path+".ttl", "must be positive (got %s)", r.TTL)
	case r.MaxEntryBytes < 0:
		return scheduling.ParamErrorf(path+".maxEntryBytes", "must be positive (got %d)", r.MaxEntryBytes)
	}
	return nil
}

func validHostPort(a string) bool {
	i := strings.LastIndexByte(a, ':')
	if i <= 0 || i == len(a)-1 {
		return false
	}
	for _, c := range a[i+1:] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func (m *MongoConfig) validate(path string) error {
	m.Database = cmp.Or(m.Database, DefaultMongoDatabase)
	m.Collection = cmp.Or(m.Collection, DefaultMongoColl)
	m.TTL = cmp.Or(m.TTL, scheduling.Duration(DefaultMongoTTL))
	m.Timeout = cmp.Or(m.Timeout, scheduling.Duration(DefaultMongoTimeout))
	switch {
	case m.URI == "":
		return scheduling.ParamErrorf(path+".uri", "required: a mongodb:// or mongodb+srv:// URI")
	case !strings.HasPrefix(m.URI, "mongodb://") && !strings.HasPrefix(m.URI, "mongodb+srv://"):
		return scheduling.ParamErrorf(path+".uri", "want a mongodb:// or mongodb+srv:// URI") // not echoed: it may hold a secret
	case mongoURIHasPassword(m.URI):
		return scheduling.ParamErrorf(path+".uri", "a password in the URI would be stored with the configuration (in etcd) and shown in errors: give username with passwordFile or passwordEnv")
	case m.TTL < 0:
		return scheduling.ParamErrorf(path+".ttl", "must be positive (got %s)", m.TTL)
	case m.Timeout < 0:
		return scheduling.ParamErrorf(path+".timeout", "must be positive (got %s)", m.Timeout)
	case strings.ContainsAny(m.Database, "/\\. \"$"):
		return scheduling.ParamErrorf(path+".database", "not a valid MongoDB database name: %q", m.Database)
	case strings.HasPrefix(m.Collection, "system.") || strings.Contains(m.Collection, "$"):
		return scheduling.ParamErrorf(path+".collection", "not a valid collection name: %q", m.Collection)
	case m.Username != "" && m.PasswordFile == "" && m.PasswordEnv == "":
		return scheduling.ParamErrorf(path+".username", "needs passwordFile or passwordEnv")
	}
	return validateSecrets(path, m.PasswordFile, m.PasswordEnv, m.TLS)
}

// mongoURIHasPassword reports whether a MongoDB URI carries a password
// (user:password@ before its hosts; a user name alone is no secret).
func mongoURIHasPassword(uri string) bool {
	rest := uri[strings.Index(uri, "://")+3:]
	if i := strings.IndexAny(rest, "/?"); i >= 0 {
		rest = rest[:i]
	}
	at := strings.LastIndexByte(rest, '@')
	return at >= 0 && strings.Contains(rest[:at], ":")
}

// validateSecrets checks a backend's password sources (one at most) and
// its tls block.
func validateSecrets(path string, file, env string, t *TLSConfig) error {
	if file != "" && env != "" {
		return scheduling.ParamErrorf(path+".password", "set one of passwordFile and passwordEnv")
	}
	if env != "" && !validEnvName(env) {
		return scheduling.ParamErrorf(path+".passwordEnv", "want the name of an environment variable (letters, digits, _), not a value")
	}
	if t != nil {
		if err := t.Validate(); err != nil {
			return scheduling.ParamErrorf(path+".tls", "%v", err)
		}
	}
	return nil
}

// validEnvName: letters, digits and underscores, not starting with a
// digit (a value pasted into passwordEnv by mistake is refused, and not
// echoed as a name).
func validEnvName(s string) bool {
	for i, c := range s {
		switch {
		case c == '_', c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return s != ""
}

func (s *StreamConfig) validate(path string) error {
	s.Key = cmp.Or(s.Key, DefaultStreamKey)
	s.ConsumerGroup = cmp.Or(s.ConsumerGroup, DefaultConsumerGroup)
	s.MaxLen = cmp.Or(s.MaxLen, DefaultStreamMaxLen)
	s.BatchSize = cmp.Or(s.BatchSize, DefaultBatchSize)
	s.BlockTimeout = cmp.Or(s.BlockTimeout, scheduling.Duration(DefaultBlockTimeout))
	s.ClaimAge = cmp.Or(s.ClaimAge, scheduling.Duration(DefaultClaimAge))
	switch {
	case strings.ContainsAny(s.Key, "{}"):
		return scheduling.ParamErrorf(path+".key", "must not contain braces: the store adds the key as a hash tag (got %q)", s.Key)
	case s.MaxLen < 0:
		return scheduling.ParamErrorf(path+".maxLen", "must be positive (got %d)", s.MaxLen)
	case s.BatchSize < 0:
		return scheduling.ParamErrorf(path+".batchSize", "must be positive (got %d)", s.BatchSize)
	case s.BlockTimeout < 0:
		return scheduling.ParamErrorf(path+".blockTimeout", "must be positive (got %s)", s.BlockTimeout)
	case s.ClaimAge < 0:
		return scheduling.ParamErrorf(path+".claimAge", "must be positive (got %s)", s.ClaimAge)
	}
	return nil
}

// FromConfig returns the raw parameters of the first responses-store
// plugin of an EndpointPickerConfig, and whether there is one.
func FromConfig(c *scheduling.Config) (json.RawMessage, bool) {
	for _, p := range c.Plugins {
		if p.Type == Type {
			return p.Parameters, true
		}
	}
	return nil, false
}

// ParseParams decodes a responses-store plugin's whole parameters object;
// warn (may be nil) receives warnings.
func ParseParams(raw json.RawMessage, warn func(string)) (*StoreConfig, error) {
	return parseParams(raw, warner(warn))
}

// Plugin is the configured plugin in a picker: the store is the responses
// service's, so the picker holds only the validated configuration.
type Plugin struct {
	scheduling.Named
	Config *StoreConfig
}

// Parameters implements scheduling.ParameterReporter: the effective
// parameters, as a config would give them.
func (p *Plugin) Parameters() any { return Params{StoreConfig: p.Config} }

func factory(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
	c, err := parseParams(raw, h)
	if err != nil {
		return nil, err
	}
	return &Plugin{Named: scheduling.Named{Type: Type, Name: name}, Config: c}, nil
}

func init() {
	scheduling.Register(scheduling.Registration{Type: Type, New: factory, Gate: scheduling.GatePrepareDataPlugins})
}
