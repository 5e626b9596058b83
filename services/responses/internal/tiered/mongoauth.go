package tiered

import (
	"errors"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/hermod/hermod/libs/plugins/responsestore"
	"github.com/hermod/hermod/libs/secret"
)

// mongoSecurity applies the mongo section's username, password (from a
// file or the environment) and tls block over what the URI says. The
// URI's other authentication settings (authSource, authMechanism) stay.
func mongoSecurity(opts *options.ClientOptions, c *responsestore.MongoConfig) error {
	if c.Username != "" || c.PasswordFile != "" || c.PasswordEnv != "" {
		var cred options.Credential
		if opts.Auth != nil {
			cred = *opts.Auth
		}
		if c.Username != "" {
			cred.Username = c.Username
		}
		pw, err := secret.Source{What: "mongo password", File: c.PasswordFile, FileSetting: "mongo.passwordFile", Env: c.PasswordEnv}.Required()
		if err != nil {
			return err
		}
		if cred.Username == "" {
			return errors.New("mongo: a password without a user name (mongo.username or in the uri)")
		}
		cred.Password, cred.PasswordSet = pw, true
		opts.SetAuth(cred)
	}
	if c.TLS != nil {
		cfg, err := c.TLS.Config()
		if err != nil {
			return fmt.Errorf("mongo.tls: %w", err)
		}
		opts.SetTLSConfig(cfg)
	}
	if opts.TLSConfig != nil && opts.TLSConfig.InsecureSkipVerify {
		return errors.New("mongo.uri: tlsInsecure / tlsAllowInvalidCertificates are not allowed: give the server's CA in mongo.tls.caFile")
	}
	return nil
}
