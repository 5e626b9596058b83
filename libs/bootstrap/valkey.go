package bootstrap

import (
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/valkey-io/valkey-go"

	"github.com/hermod/hermod/libs/secret"
	"github.com/hermod/hermod/libs/tlsconfig"
)

// ValkeySecurity is how a service proves itself to a Valkey/Redis server
// it reaches by URL (the picker's in-flight server, the indexer's shared
// index) and checks it: TLS (the CA that signed the server's certificate,
// a client certificate for tls-auth-clients) and an ACL user whose
// password comes from a file or an environment variable, never from the
// URL in a flag.
type ValkeySecurity struct {
	// Prefix names the flags (--<prefix>-ca-file, ...) and the password's
	// variable (HERMOD_<PREFIX>_PASSWORD).
	Prefix       string
	TLS          tlsconfig.ClientFiles
	Username     string
	PasswordFile string
}

// PasswordEnv is the environment variable that may hold the password.
func (v *ValkeySecurity) PasswordEnv() string {
	return "HERMOD_" + strings.ToUpper(strings.ReplaceAll(v.Prefix, "-", "_")) + "_PASSWORD"
}

// RegisterFlags adds --<prefix>-ca-file, -cert-file, -key-file,
// -server-name, -username and -password-file to fs; what names the server
// in their help ("the in-flight server").
func (v *ValkeySecurity) RegisterFlags(fs *flag.FlagSet, prefix, what string) {
	v.Prefix = prefix
	fs.StringVar(&v.TLS.CAFile, prefix+"-ca-file", "", "PEM file of the CA that signed "+what+"'s certificate (sets TLS, as a rediss:// or valkeys:// URL does)")
	fs.StringVar(&v.TLS.CertFile, prefix+"-cert-file", "", "PEM client certificate for "+what+" (tls-auth-clients; with --"+prefix+"-key-file)")
	fs.StringVar(&v.TLS.KeyFile, prefix+"-key-file", "", "PEM key of --"+prefix+"-cert-file")
	fs.StringVar(&v.TLS.ServerName, prefix+"-server-name", "", "the name "+what+"'s certificate must carry (default: the URL's host)")
	fs.StringVar(&v.Username, prefix+"-username", "", "ACL user at "+what+"; its password from --"+prefix+"-password-file or "+v.PasswordEnv())
	fs.StringVar(&v.PasswordFile, prefix+"-password-file", "", "file holding the password at "+what+" (or set "+v.PasswordEnv()+")")
}

// ClientOption parses a valkey://, redis://, valkeys:// or rediss:// URL
// and applies the security settings over it: a password in the URL is
// refused (a flag's value shows in ps), TLS files turn TLS on, and
// skipping verification is refused.
func (v ValkeySecurity) ClientOption(rawURL string) (valkey.ClientOption, error) {
	opt, err := valkey.ParseURL(rawURL)
	if err != nil {
		return opt, err
	}
	if opt.Password != "" {
		return opt, fmt.Errorf("a password in the URL: give it in --%s-password-file or %s", v.Prefix, v.PasswordEnv())
	}
	if v.Username != "" {
		opt.Username = v.Username
	}
	pw, ok, err := secret.Source{What: v.Prefix + " password", File: v.PasswordFile, FileSetting: "--" + v.Prefix + "-password-file", Env: v.PasswordEnv()}.Lookup()
	if err != nil {
		return opt, err
	}
	if ok {
		opt.Password = pw
	}
	if v.TLS.Set() {
		cfg, err := v.TLS.Config()
		if err != nil {
			return opt, fmt.Errorf("--%s-*-file: %w", v.Prefix, err)
		}
		opt.TLSConfig = cfg
	}
	if opt.TLSConfig != nil && opt.TLSConfig.InsecureSkipVerify {
		return opt, errors.New("skip_verify is not allowed: give the server's CA in --" + v.Prefix + "-ca-file")
	}
	return opt, nil
}
