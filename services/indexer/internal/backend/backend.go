// Package backend reads the index backend configuration, reference/001's
// kvBlockIndexConfig: exactly one of inMemoryConfig, costAwareMemoryConfig,
// redisConfig and valkeyConfig.
package backend

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/hermod/hermod/libs/cmdline"
)

// Config is a kvBlockIndexConfig.
type Config struct {
	InMemory  *InMemory  `json:"inMemoryConfig,omitempty"`
	CostAware *CostAware `json:"costAwareMemoryConfig,omitempty"`
	Redis     *Redis     `json:"redisConfig,omitempty"`
	Valkey    *Redis     `json:"valkeyConfig,omitempty"`
	// EnableMetrics is accepted for compatibility: the indexer always
	// exports its metrics.
	EnableMetrics bool `json:"enableMetrics,omitempty"`
	// MetricsLoggingInterval, when set, logs the index's figures this
	// often (e.g. "10s").
	MetricsLoggingInterval string `json:"metricsLoggingInterval,omitempty"`
}

// InMemory is inMemoryConfig.
type InMemory struct {
	Size         int `json:"size,omitempty"`
	PodCacheSize int `json:"podCacheSize,omitempty"`
}

// CostAware is costAwareMemoryConfig.
type CostAware struct {
	Size string `json:"size,omitempty"`
}

// Redis is redisConfig and valkeyConfig.
type Redis struct {
	Address     string `json:"address,omitempty"`
	BackendType string `json:"backendType,omitempty"`
	EnableRDMA  bool   `json:"enableRDMA,omitempty"`
}

// DefaultRedisAddress is reference/001's default address.
const DefaultRedisAddress = "redis://127.0.0.1:6379"

// Resolved is what a Config asks of the indexer.
type Resolved struct {
	// Size, PodCacheSize and MaxBytes bound the in-memory index (zero:
	// the index's defaults, no byte bound).
	Size, PodCacheSize int
	MaxBytes           int64
	// RedisURL, when set, selects the shared Valkey/Redis index.
	RedisURL string
	// LogInterval is metricsLoggingInterval (0: none).
	LogInterval time.Duration
	// Warnings are settings accepted but without effect here.
	Warnings []string
}

// Read parses a kvBlockIndexConfig given inline (YAML or JSON) or, with a
// leading @, from a file.
func Read(arg string) (Resolved, error) {
	data := []byte(arg)
	if name, ok := strings.CutPrefix(arg, "@"); ok {
		b, err := os.ReadFile(name)
		if err != nil {
			return Resolved{}, fmt.Errorf("kvBlockIndexConfig: %w", err)
		}
		data = b
	}
	c, err := Parse(data)
	if err != nil {
		return Resolved{}, err
	}
	return c.Resolve()
}

// Parse decodes a kvBlockIndexConfig; unknown fields are errors that name
// them.
func Parse(data []byte) (Config, error) {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return Config{}, fmt.Errorf("kvBlockIndexConfig: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	var c Config
	if err := dec.Decode(&c); err != nil {
		return Config{}, fmt.Errorf("kvBlockIndexConfig: %w", err)
	}
	return c, nil
}

// Resolve checks the configuration and says what it selects.
func (c Config) Resolve() (Resolved, error) {
	var r Resolved
	var set []string
	var errs []error
	if c.InMemory != nil {
		set = append(set, "inMemoryConfig")
		if c.InMemory.Size < 0 {
			errs = append(errs, fmt.Errorf("inMemoryConfig.size: must be positive (got %d)", c.InMemory.Size))
		}
		if c.InMemory.PodCacheSize < 0 || c.InMemory.PodCacheSize > 255 {
			errs = append(errs, fmt.Errorf("inMemoryConfig.podCacheSize: must be between 1 and 255 (got %d)", c.InMemory.PodCacheSize))
		}
		r.Size, r.PodCacheSize = c.InMemory.Size, c.InMemory.PodCacheSize
	}
	if c.CostAware != nil {
		set = append(set, "costAwareMemoryConfig")
		size := c.CostAware.Size
		if size == "" {
			size = "2GiB"
		}
		var b cmdline.ByteSize
		if err := b.Set(size); err != nil || b <= 0 {
			errs = append(errs, fmt.Errorf("costAwareMemoryConfig.size: %q is not a positive size like 2GiB or 500MiB", c.CostAware.Size))
		}
		r.MaxBytes = int64(b)
	}
	for _, rc := range []struct {
		name string
		cfg  *Redis
	}{{"redisConfig", c.Redis}, {"valkeyConfig", c.Valkey}} {
		if rc.cfg == nil {
			continue
		}
		set = append(set, rc.name)
		u, warn, err := rc.cfg.url(rc.name)
		if err != nil {
			errs = append(errs, err)
		}
		r.RedisURL = u
		r.Warnings = append(r.Warnings, warn...)
	}
	switch {
	case len(set) == 0:
		errs = append(errs, errors.New("kvBlockIndexConfig: configure one backend: inMemoryConfig, costAwareMemoryConfig, redisConfig or valkeyConfig"))
	case len(set) > 1:
		errs = append(errs, fmt.Errorf("kvBlockIndexConfig: configure exactly one backend (got %s)", strings.Join(set, ", ")))
	}
	if c.MetricsLoggingInterval != "" {
		d, err := time.ParseDuration(c.MetricsLoggingInterval)
		if err != nil || d < 0 {
			errs = append(errs, fmt.Errorf("metricsLoggingInterval: %q is not a duration like 10s", c.MetricsLoggingInterval))
		}
		r.LogInterval = d
	}
	if err := errors.Join(errs...); err != nil {
		return Resolved{}, err
	}
	return r, nil
}

func (rc *Redis) url(field string) (string, []string, error) {
	var warn []string
	switch rc.BackendType {
	case "", "redis", "valkey":
	default:
		return "", nil, fmt.Errorf("%s.backendType: %q is not redis or valkey", field, rc.BackendType)
	}
	if rc.EnableRDMA {
		if rc.BackendType != "valkey" {
			return "", nil, fmt.Errorf("%s.enableRDMA: RDMA is for the valkey backendType only", field)
		}
		warn = append(warn, field+".enableRDMA: RDMA is not supported by this build; the index uses TCP")
	}
	addr := rc.Address
	if addr == "" {
		addr = DefaultRedisAddress
	}
	u, err := url.Parse(addr)
	if err != nil || u.Host == "" && u.Scheme != "unix" {
		return "", nil, fmt.Errorf("%s.address: %q is not a redis://, rediss://, valkey://, valkeys:// or unix:// URL", field, addr)
	}
	switch u.Scheme {
	case "redis", "rediss", "valkey", "valkeys", "unix":
	default:
		return "", nil, fmt.Errorf("%s.address: scheme %q is not redis, rediss, valkey, valkeys or unix", field, u.Scheme)
	}
	return addr, warn, nil
}
