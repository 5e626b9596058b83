package bootstrap

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/nats-io/nats.go"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/hermod/hermod/libs/bus"
	"github.com/hermod/hermod/libs/coord"
	"github.com/hermod/hermod/libs/secret"
	"github.com/hermod/hermod/libs/tlsconfig"
)

// The environment variables that may hold backend secrets themselves. No
// flag takes a secret (a flag's value shows in ps and /proc/<pid>/cmdline):
// a flag names a file, or the secret comes from one of these.
const (
	EnvEtcdPassword = "HERMOD_ETCD_PASSWORD"
	EnvNATSPassword = "HERMOD_NATS_PASSWORD"
	EnvNATSToken    = "HERMOD_NATS_TOKEN"
)

// The flags of EtcdSecurity and NATSSecurity, for programs that list
// their flags (hermodctl's global flags and context files).
var (
	EtcdSecurityFlags = []string{"etcd-ca-file", "etcd-cert-file", "etcd-key-file", "etcd-server-name", "etcd-username", "etcd-password-file"}
	NATSSecurityFlags = []string{"nats-ca-file", "nats-cert-file", "nats-key-file", "nats-user", "nats-password-file", "nats-token-file", "nats-nkey-file", "nats-creds-file"}
)

// EtcdSecurity is how a client proves itself to etcd and checks etcd: TLS
// (the CA that signed etcd's certificate, a client certificate when etcd
// asks for one) and an etcd user. The password comes from PasswordFile or
// else from HERMOD_ETCD_PASSWORD.
type EtcdSecurity struct {
	TLS          tlsconfig.ClientFiles
	Username     string
	PasswordFile string
}

// RegisterFlags adds --etcd-ca-file, --etcd-cert-file, --etcd-key-file,
// --etcd-server-name, --etcd-username and --etcd-password-file to fs.
func (e *EtcdSecurity) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&e.TLS.CAFile, "etcd-ca-file", "", "PEM file of the CA that signed etcd's certificate (sets TLS; default roots: the system's)")
	fs.StringVar(&e.TLS.CertFile, "etcd-cert-file", "", "PEM client certificate for etcd (with --etcd-key-file; sets TLS)")
	fs.StringVar(&e.TLS.KeyFile, "etcd-key-file", "", "PEM key of --etcd-cert-file")
	fs.StringVar(&e.TLS.ServerName, "etcd-server-name", "", "the name etcd's certificate must carry (default: the endpoint's host; sets TLS)")
	fs.StringVar(&e.Username, "etcd-username", "", "etcd user (RBAC); its password from --etcd-password-file or "+EnvEtcdPassword)
	fs.StringVar(&e.PasswordFile, "etcd-password-file", "", "file holding the etcd user's password (or set "+EnvEtcdPassword+")")
}

// ClientOptions reads the files and the environment and returns the
// options of coord.NewClient that apply them.
func (e EtcdSecurity) ClientOptions() ([]coord.Option, error) {
	var opts []coord.Option
	if e.TLS.Set() {
		cfg, err := e.TLS.Config()
		if err != nil {
			return nil, fmt.Errorf("etcd TLS: %w", err)
		}
		opts = append(opts, coord.WithTLS(cfg))
	}
	password, ok, err := secret.Source{What: "etcd password", File: e.PasswordFile, FileSetting: "--etcd-password-file", Env: EnvEtcdPassword}.Lookup()
	switch {
	case err != nil:
		return nil, err
	case ok && e.Username == "":
		return nil, errors.New("etcd password given without --etcd-username")
	case !ok && e.Username != "":
		return nil, fmt.Errorf("--etcd-username %s: no password (--etcd-password-file or %s)", e.Username, EnvEtcdPassword)
	case ok:
		opts = append(opts, coord.WithCredentials(e.Username, password))
	}
	return opts, nil
}

// NewClient connects to etcd at endpoints with these settings (see
// coord.NewClient).
func (e EtcdSecurity) NewClient(ctx context.Context, endpoints []string, opts ...coord.Option) (*clientv3.Client, error) {
	sec, err := e.ClientOptions()
	if err != nil {
		return nil, err
	}
	return coord.NewClient(ctx, endpoints, append(sec, opts...)...)
}

// NATSSecurity is how a client proves itself to NATS and checks NATS: TLS
// (the CA, a client certificate when the server verifies clients) and at
// most one way to authenticate: a user and password, a token, an NKey
// seed file, or a .creds file (a user JWT with its seed, for
// operator-mode servers). Password and token come from their files or
// else from HERMOD_NATS_PASSWORD and HERMOD_NATS_TOKEN.
type NATSSecurity struct {
	TLS          tlsconfig.ClientFiles
	User         string
	PasswordFile string
	TokenFile    string
	NKeyFile     string
	CredsFile    string
}

// RegisterFlags adds --nats-ca-file, --nats-cert-file, --nats-key-file,
// --nats-user, --nats-password-file, --nats-token-file, --nats-nkey-file
// and --nats-creds-file to fs.
func (n *NATSSecurity) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&n.TLS.CAFile, "nats-ca-file", "", "PEM file of the CA that signed the NATS server's certificate (requires TLS)")
	fs.StringVar(&n.TLS.CertFile, "nats-cert-file", "", "PEM client certificate for NATS (with --nats-key-file; requires TLS)")
	fs.StringVar(&n.TLS.KeyFile, "nats-key-file", "", "PEM key of --nats-cert-file")
	fs.StringVar(&n.User, "nats-user", "", "NATS user; its password from --nats-password-file or "+EnvNATSPassword)
	fs.StringVar(&n.PasswordFile, "nats-password-file", "", "file holding the NATS user's password (or set "+EnvNATSPassword+")")
	fs.StringVar(&n.TokenFile, "nats-token-file", "", "file holding the NATS authentication token (or set "+EnvNATSToken+")")
	fs.StringVar(&n.NKeyFile, "nats-nkey-file", "", "NATS NKey seed file (SU...)")
	fs.StringVar(&n.CredsFile, "nats-creds-file", "", "NATS .creds file (user JWT and seed)")
}

// Options reads the files and the environment and returns the nats.go
// options that apply them, for bus.WithNATSOptions.
func (n NATSSecurity) Options() ([]nats.Option, error) {
	var opts []nats.Option
	if n.TLS.Set() {
		cfg, err := n.TLS.Config()
		if err != nil {
			return nil, fmt.Errorf("nats TLS: %w", err)
		}
		opts = append(opts, nats.Secure(cfg))
	}
	auth, err := n.authOption()
	if err != nil {
		return nil, err
	}
	if auth != nil {
		opts = append(opts, auth)
	}
	return opts, nil
}

// authOption returns the one authentication option set, or nil.
func (n NATSSecurity) authOption() (nats.Option, error) {
	password, hasPassword, err := secret.Source{What: "nats password", File: n.PasswordFile, FileSetting: "--nats-password-file", Env: EnvNATSPassword}.Lookup()
	if err != nil {
		return nil, err
	}
	token, hasToken, err := secret.Source{What: "nats token", File: n.TokenFile, FileSetting: "--nats-token-file", Env: EnvNATSToken}.Lookup()
	if err != nil {
		return nil, err
	}
	var set []string
	for _, m := range []struct {
		name string
		on   bool
	}{{"--nats-user", n.User != "" || hasPassword}, {"a token", hasToken}, {"--nats-nkey-file", n.NKeyFile != ""}, {"--nats-creds-file", n.CredsFile != ""}} {
		if m.on {
			set = append(set, m.name)
		}
	}
	if len(set) > 1 {
		return nil, fmt.Errorf("nats: one way to authenticate at a time (user and password, token, nkey or creds), got %s", strings.Join(set, ", "))
	}
	switch {
	case n.User != "" && !hasPassword:
		return nil, fmt.Errorf("--nats-user %s: no password (--nats-password-file or %s)", n.User, EnvNATSPassword)
	case hasPassword && n.User == "":
		return nil, errors.New("nats password given without --nats-user")
	case hasPassword:
		return nats.UserInfo(n.User, password), nil
	case hasToken:
		return nats.Token(token), nil
	case n.NKeyFile != "":
		opt, err := nats.NkeyOptionFromSeed(n.NKeyFile)
		if err != nil {
			return nil, fmt.Errorf("--nats-nkey-file %s: %w", n.NKeyFile, err)
		}
		return opt, nil
	case n.CredsFile != "":
		// nats.go reads the file at every (re)connect, so a rotated file
		// is picked up; check now that it is there.
		if _, err := os.Stat(n.CredsFile); err != nil {
			return nil, fmt.Errorf("--nats-creds-file: %w", err)
		}
		return nats.UserCredentials(n.CredsFile), nil
	}
	return nil, nil
}

// Connect connects to NATS at url with these settings (see bus.Connect).
func (n NATSSecurity) Connect(ctx context.Context, url, name string, opts ...bus.Option) (*nats.Conn, error) {
	sec, err := n.Options()
	if err != nil {
		return nil, err
	}
	return bus.Connect(ctx, url, name, append(opts, bus.WithNATSOptions(sec...))...)
}

// urlHasPassword says whether a URL (or a comma-separated list) carries a
// password, which then shows wherever the URL does (ps, /proc, logs of
// the command line).
func urlHasPassword(urls string) bool {
	for _, s := range strings.Split(urls, ",") {
		if u, err := url.Parse(strings.TrimSpace(s)); err == nil && u.User != nil {
			if _, ok := u.User.Password(); ok {
				return true
			}
			switch u.Scheme {
			case "nats", "tls", "ws", "wss":
				if u.User.Username() != "" {
					return true // a token
				}
			}
		}
	}
	return false
}
