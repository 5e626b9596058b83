package tiered

import (
	"errors"
	"fmt"

	"github.com/valkey-io/valkey-go"

	"github.com/hermod/hermod/libs/plugins/responsestore"
	"github.com/hermod/hermod/libs/secret"
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
	if err := applySecurity(&opt, c); err != nil {
		return opt, err
	}
	if c.DB != 0 {
		opt.SelectDB = c.DB
	}
	// Records are read once or twice per conversation turn: a client-side
	// cache would hold memory for nothing.
	opt.DisableCache = true
	return opt, nil
}

// applySecurity sets the password (from a file or from the environment;
// an inline one is refused by the configuration) and the TLS of the tls
// block; a rediss:// address without
// one uses TLS with the system's roots. Skipping verification
// (skip_verify in the URL) is refused.
func applySecurity(opt *valkey.ClientOption, c *responsestore.RedisConfig) error {
	switch {
	case c.PasswordFile != "" || c.PasswordEnv != "":
		pw, err := secret.Source{What: "redis password", File: c.PasswordFile, FileSetting: "redis.passwordFile", Env: c.PasswordEnv}.Required()
		if err != nil {
			return err
		}
		opt.Password = pw
	}
	if c.TLS != nil {
		cfg, err := c.TLS.Config()
		if err != nil {
			return fmt.Errorf("redis.tls: %w", err)
		}
		opt.TLSConfig = cfg
	}
	if opt.TLSConfig != nil && opt.TLSConfig.InsecureSkipVerify {
		return errors.New("redis.address: skip_verify is not allowed: give the server's CA in redis.tls.caFile")
	}
	return nil
}
