package tiered

import (
	"fmt"

	"github.com/valkey-io/valkey-go"

	"github.com/hermod/hermod/libs/plugins/responsestore"
)

// clientOption turns the redis section into a valkey-go client option:
// a standalone URL, a Sentinel-managed master, or a Cluster.
func clientOption(c *responsestore.RedisConfig) (valkey.ClientOption, error) {
	var opt valkey.ClientOption
	switch c.Mode() {
	case responsestore.Standalone:
		if c.Address != "" {
			var err error
			if opt, err = valkey.ParseURL(c.Address); err != nil {
				return opt, fmt.Errorf("redis.address: %w", err)
			}
		} else {
			opt.InitAddress = c.Addresses
		}
		opt.ForceSingleClient = true
	case responsestore.Sentinel:
		opt.InitAddress = c.Addresses
		opt.Sentinel = valkey.SentinelOption{MasterSet: c.MasterName}
	case responsestore.Cluster:
		opt.InitAddress = c.Addresses
	}
	if c.Username != "" {
		opt.Username = c.Username
	}
	if c.Password != "" {
		opt.Password = c.Password
	}
	if c.DB != 0 {
		opt.SelectDB = c.DB
	}
	// Records are read once or twice per conversation turn: a client-side
	// cache would hold memory for nothing.
	opt.DisableCache = true
	return opt, nil
}
