package bootstrap

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/hermod/hermod/libs/tlsconfig"
	"github.com/hermod/hermod/testkit/certs"
	"github.com/hermod/hermod/testkit/etcdembed"
	"github.com/hermod/hermod/testkit/natsembed"
)

// pki is a CA with a server certificate for loopback and a client
// certificate (CN hermod-picker), written to a directory.
type pki struct {
	dir    string
	ca     *certs.CA
	caFile string
	server certs.Files
	client certs.Files
	// other is a client certificate of another CA.
	other certs.Files
}

func newPKI(t *testing.T) pki {
	t.Helper()
	p := pki{dir: t.TempDir()}
	var err error
	if p.ca, err = certs.NewCA("hermod test CA"); err != nil {
		t.Fatal(err)
	}
	p.caFile = filepath.Join(p.dir, "ca.crt")
	if err := p.ca.WriteCA(p.caFile); err != nil {
		t.Fatal(err)
	}
	p.server = p.write(t, p.ca, "server", true)
	p.client = p.write(t, p.ca, "picker", false)
	other, err := certs.NewCA("another CA")
	if err != nil {
		t.Fatal(err)
	}
	p.other = p.write(t, other, "other", false)
	return p
}

func (p pki) write(t *testing.T, ca *certs.CA, service string, server bool) certs.Files {
	t.Helper()
	issue := ca.Client
	if server {
		issue = ca.Server
	}
	kp, err := issue(service)
	if err != nil {
		t.Fatal(err)
	}
	f, err := kp.Write(p.dir, service)
	if err != nil {
		t.Fatal(err)
	}
	f.CA = p.caFile
	return f
}

// clientTLS are the files of a client with the CA and the client
// certificate.
func (p pki) clientTLS() tlsconfig.ClientFiles {
	return tlsconfig.ClientFiles{CAFile: p.caFile, CertFile: p.client.Cert, KeyFile: p.client.Key}
}

// serverTLS is the server side: the server certificate, client
// certificates verified.
func (p pki) serverTLS(t *testing.T) *tls.Config {
	t.Helper()
	b, err := os.ReadFile(p.server.Cert)
	if err != nil {
		t.Fatal(err)
	}
	k, err := os.ReadFile(p.server.Key)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(b, k)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{pair}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: p.ca.Pool(), MinVersion: tls.VersionTLS12}
}

func writeSecret(t *testing.T, name, value string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(value+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// startSecureEtcd runs etcd with client-certificate authentication and
// RBAC: root, and the user hermod with read-write on /hermod/.
func startSecureEtcd(t *testing.T, p pki, hermodPassword string) *etcdembed.Server {
	t.Helper()
	if testing.Short() {
		t.Skip("starts an etcd server (skipped with -short)")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	srv, err := etcdembed.Start(ctx, etcdembed.Options{UnsafeNoFsync: true, CompactionRetention: -1,
		ClientTLS: &etcdembed.TLSFiles{CertFile: p.server.Cert, KeyFile: p.server.Key, TrustedCAFile: p.caFile, ClientCertAuth: true}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	tlsCfg, err := p.clientTLS().Config()
	if err != nil {
		t.Fatal(err)
	}
	admin, err := clientv3.New(clientv3.Config{Endpoints: srv.ClientURLs(), TLS: tlsCfg, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = admin.Close() }()
	if err := etcdembed.SetupAuth(ctx, admin, "root-password", etcdembed.User{Name: "hermod", Password: hermodPassword, Prefix: "/hermod/"}); err != nil {
		t.Fatal(err)
	}
	return srv
}

// etcd with TLS, client certificates and RBAC: a service connects through
// the shared flags' settings only with the CA, a client certificate and
// the user's password (from a file or HERMOD_ETCD_PASSWORD), and then
// reaches /hermod/ and nothing else.
func TestEtcdTLSAndCredentials(t *testing.T) {
	p := newPKI(t)
	const password = "etcd-pass-7f3a"
	srv := startSecureEtcd(t, p, password)
	passwordFile := writeSecret(t, "etcd-password", password)
	wrongFile := writeSecret(t, "wrong", "not-the-password")
	good := p.clientTLS()

	for _, tc := range []struct {
		name   string
		sec    EtcdSecurity
		env    string
		errHas string
	}{
		{name: "no TLS", sec: EtcdSecurity{Username: "hermod", PasswordFile: passwordFile}, errHas: "TLS that does not match"},
		{name: "no client certificate", sec: EtcdSecurity{TLS: tlsconfig.ClientFiles{CAFile: p.caFile}, Username: "hermod", PasswordFile: passwordFile}, errHas: "TLS that does not match"},
		{name: "another CA's client certificate", sec: EtcdSecurity{TLS: tlsconfig.ClientFiles{CAFile: p.caFile, CertFile: p.other.Cert, KeyFile: p.other.Key}, Username: "hermod", PasswordFile: passwordFile}, errHas: "TLS that does not match"},
		{name: "without the CA", sec: EtcdSecurity{TLS: tlsconfig.ClientFiles{CertFile: p.client.Cert, KeyFile: p.client.Key}, Username: "hermod", PasswordFile: passwordFile}, errHas: "TLS that does not match"},
		{name: "certificate of no user", sec: EtcdSecurity{TLS: good}, errHas: "does not answer"},
		{name: "wrong password", sec: EtcdSecurity{TLS: good, Username: "hermod", PasswordFile: wrongFile}, errHas: "authentication failed"},
		{name: "password file", sec: EtcdSecurity{TLS: good, Username: "hermod", PasswordFile: passwordFile}},
		{name: "password from the environment", sec: EtcdSecurity{TLS: good, Username: "hermod"}, env: password},
		{name: "user without a password", sec: EtcdSecurity{TLS: good, Username: "hermod"}, errHas: "no password"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env != "" {
				t.Setenv(EnvEtcdPassword, tc.env)
			} else {
				t.Parallel() // the refused dials wait for their timeout
			}
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			s, err := Start(ctx, Options{Name: "hermod-test", Config: Config{Pool: "p", EtcdEndpoints: srv.ClientURLs(), Etcd: tc.sec}, Logger: quiet()})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			cli, err := s.Etcd(ctx)
			if tc.errHas != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errHas) {
					t.Fatalf("err = %v, want one saying %q", err, tc.errHas)
				}
				if strings.Contains(err.Error(), password) {
					t.Fatalf("the error shows the password: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if _, err := cli.Put(ctx, "/hermod/pools/p/config", "x"); err != nil {
				t.Fatalf("put under /hermod/: %v", err)
			}
			if _, err := cli.Put(ctx, "/elsewhere", "x"); !errors.Is(err, rpctypes.ErrPermissionDenied) {
				t.Fatalf("put outside /hermod/: %v, want permission denied", err)
			}
		})
	}
}

// The client refuses settings that would not do what they say.
func TestEtcdSecuritySettingsChecked(t *testing.T) {
	ctx := t.Context()
	passwordFile := writeSecret(t, "etcd-password", "pw")
	for _, tc := range []struct {
		name      string
		endpoints []string
		sec       EtcdSecurity
		env       string
		errHas    string
	}{
		{"TLS with an http endpoint", []string{"http://127.0.0.1:1"}, EtcdSecurity{TLS: tlsconfig.ClientFiles{ServerName: "etcd"}}, "", "plain http"},
		{"password without a user", []string{"127.0.0.1:1"}, EtcdSecurity{PasswordFile: passwordFile}, "", "without --etcd-username"},
		{"file and environment", []string{"127.0.0.1:1"}, EtcdSecurity{Username: "u", PasswordFile: passwordFile}, "pw", EnvEtcdPassword},
		{"missing password file", []string{"127.0.0.1:1"}, EtcdSecurity{Username: "u", PasswordFile: passwordFile + ".missing"}, "", "--etcd-password-file"},
		{"certificate without key", []string{"127.0.0.1:1"}, EtcdSecurity{TLS: tlsconfig.ClientFiles{CertFile: "c.pem"}}, "", "key file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env != "" {
				t.Setenv(EnvEtcdPassword, tc.env)
			}
			if _, err := tc.sec.NewClient(ctx, tc.endpoints); err == nil || !strings.Contains(err.Error(), tc.errHas) {
				t.Fatalf("err = %v, want one saying %q", err, tc.errHas)
			}
		})
	}
}

// startSecureNATS runs NATS requiring TLS (client certificates verified
// when verify) with the given authentication.
func startSecureNATS(t *testing.T, p pki, verify bool, o natsembed.Options) *natsembed.Server {
	t.Helper()
	o.TLS = p.serverTLS(t)
	if !verify {
		o.TLS.ClientAuth = tls.NoClientCert
	}
	srv, err := natsembed.Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	return srv
}

type natsCase struct {
	name   string
	sec    NATSSecurity
	env    map[string]string
	refuse bool
}

// runNATSCases connects to url through the shared start-up with each
// case's settings: refused ones must fail (without showing a secret), the
// others publish.
func runNATSCases(t *testing.T, url string, secrets []string, cases []natsCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			if len(tc.env) == 0 {
				t.Parallel() // the refused connects retry until their deadline
			}
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
			defer cancel()
			s, err := Start(ctx, Options{Name: "hermod-test", Config: Config{Pool: "p", NATSURL: url, NATS: tc.sec}, Logger: quiet()})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			nc, err := s.NATS(ctx)
			if tc.refuse {
				if err == nil {
					t.Fatal("connected")
				}
				for _, sec := range secrets {
					if strings.Contains(err.Error(), sec) {
						t.Fatalf("the error shows a secret: %v", err)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := nc.Publish("hermod.test", []byte("x")); err != nil {
				t.Fatal(err)
			}
			if err := nc.FlushWithContext(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// NATS with TLS, client certificates and users (password and NKey): a
// service connects only with the CA, its certificate and a user's
// credentials from files or the environment.
func TestNATSTLSUsersAndNKeys(t *testing.T) {
	p := newPKI(t)
	const password = "nats-pass-91c2"
	user, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := user.PublicKey()
	seed, _ := user.Seed()
	stranger, _ := nkeys.CreateUser()
	strangerSeed, _ := stranger.Seed()
	srv := startSecureNATS(t, p, true, natsembed.Options{
		Users: []*server.User{{Username: "hermod", Password: password}},
		NKeys: []*server.NkeyUser{{Nkey: pub}},
	})
	passwordFile := writeSecret(t, "nats-password", password)
	good := p.clientTLS()
	runNATSCases(t, srv.ClientURL(), []string{password, string(seed)}, []natsCase{
		{name: "no TLS settings", sec: NATSSecurity{User: "hermod", PasswordFile: passwordFile}, refuse: true},
		{name: "no client certificate", sec: NATSSecurity{TLS: tlsconfig.ClientFiles{CAFile: p.caFile}, User: "hermod", PasswordFile: passwordFile}, refuse: true},
		{name: "another CA's certificate", sec: NATSSecurity{TLS: tlsconfig.ClientFiles{CAFile: p.caFile, CertFile: p.other.Cert, KeyFile: p.other.Key}, User: "hermod", PasswordFile: passwordFile}, refuse: true},
		{name: "no credentials", sec: NATSSecurity{TLS: good}, refuse: true},
		{name: "wrong password", sec: NATSSecurity{TLS: good, User: "hermod", PasswordFile: writeSecret(t, "wrong", "nope")}, refuse: true},
		{name: "unknown nkey", sec: NATSSecurity{TLS: good, NKeyFile: writeSecret(t, "stranger.nk", string(strangerSeed))}, refuse: true},
		{name: "password file", sec: NATSSecurity{TLS: good, User: "hermod", PasswordFile: passwordFile}},
		{name: "password from the environment", sec: NATSSecurity{TLS: good, User: "hermod"}, env: map[string]string{EnvNATSPassword: password}},
		{name: "nkey seed file", sec: NATSSecurity{TLS: good, NKeyFile: writeSecret(t, "user.nk", string(seed))}},
	})
}

// NATS with TLS (server certificate only) and a token.
func TestNATSToken(t *testing.T) {
	p := newPKI(t)
	const token = "nats-token-5d0e"
	srv := startSecureNATS(t, p, false, natsembed.Options{Token: token})
	ca := tlsconfig.ClientFiles{CAFile: p.caFile}
	runNATSCases(t, srv.ClientURL(), []string{token}, []natsCase{
		{name: "no token", sec: NATSSecurity{TLS: ca}, refuse: true},
		{name: "wrong token", sec: NATSSecurity{TLS: ca, TokenFile: writeSecret(t, "wrong", "nope")}, refuse: true},
		{name: "token file", sec: NATSSecurity{TLS: ca, TokenFile: writeSecret(t, "token", token)}},
		{name: "token from the environment", sec: NATSSecurity{TLS: ca}, env: map[string]string{EnvNATSToken: token}},
	})
}

// A secret in the NATS URL is refused before any dial, and not shown.
func TestNATSURLSecretRefused(t *testing.T) {
	for _, url := range []string{"nats://user:hunter2@127.0.0.1:4222", "tls://hunter2@127.0.0.1:4222", "nats://127.0.0.1:4222,nats://u:hunter2@127.0.0.2:4222"} {
		s, err := Start(t.Context(), Options{Name: "hermod-test", Config: Config{Pool: "p", NATSURL: url}, Logger: quiet()})
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.NATS(t.Context())
		s.Close()
		if err == nil || !strings.Contains(err.Error(), "--nats-password-file") || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: %v", url, err)
		}
	}
}

// The settings are checked before any dial: one way to authenticate, a
// user with a password, a password with a user, files that exist.
func TestNATSSecuritySettingsChecked(t *testing.T) {
	pw := writeSecret(t, "pw", "pw")
	for _, tc := range []struct {
		name   string
		sec    NATSSecurity
		errHas string
	}{
		{"user and token", NATSSecurity{User: "u", PasswordFile: pw, TokenFile: pw}, "one way to authenticate"},
		{"nkey and creds", NATSSecurity{NKeyFile: pw, CredsFile: pw}, "one way to authenticate"},
		{"user without password", NATSSecurity{User: "u"}, "no password"},
		{"password without user", NATSSecurity{PasswordFile: pw}, "without --nats-user"},
		{"missing creds file", NATSSecurity{CredsFile: pw + ".missing"}, "--nats-creds-file"},
		{"bad nkey seed", NATSSecurity{NKeyFile: pw}, "--nats-nkey-file"},
		{"missing CA", NATSSecurity{TLS: tlsconfig.ClientFiles{CAFile: pw + ".missing"}}, "nats TLS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tc.sec.Options(); err == nil || !strings.Contains(err.Error(), tc.errHas) {
				t.Fatalf("err = %v, want one saying %q", err, tc.errHas)
			}
		})
	}
	creds := writeSecret(t, "user.creds", "-----BEGIN NATS USER JWT-----\nx\n------END NATS USER JWT------\n")
	if opts, err := (NATSSecurity{CredsFile: creds}).Options(); err != nil || len(opts) != 1 {
		t.Fatalf("creds file: %d options, %v", len(opts), err)
	}
}

// No flag takes a secret: the passwords and the token have no flag (and
// so no HERMOD_* variable maps onto one); the flags name files.
func TestNoSecretFlags(t *testing.T) {
	var cfg Config
	cmd := NewCommand("hermod-test", &cfg, Flags{})
	for _, name := range []string{"etcd-password", "nats-password", "nats-token", "etcd-ca-file", "etcd-cert-file", "etcd-key-file", "etcd-username",
		"etcd-password-file", "nats-ca-file", "nats-cert-file", "nats-key-file", "nats-user", "nats-password-file", "nats-token-file", "nats-nkey-file", "nats-creds-file"} {
		secretFlag := name == "etcd-password" || name == "nats-password" || name == "nats-token"
		if (cmd.Lookup(name) != nil) == secretFlag {
			t.Errorf("flag --%s registered: %v", name, cmd.Lookup(name) != nil)
		}
	}
	for _, name := range slices.Concat(EtcdSecurityFlags, NATSSecurityFlags) {
		if cmd.Lookup(name) == nil {
			t.Errorf("listed flag --%s is not registered", name)
		}
	}
	t.Setenv("HERMOD_ETCD_PASSWORD_FILE", "/run/secrets/etcd")
	t.Setenv("HERMOD_NATS_CREDS_FILE", "/run/secrets/nats.creds")
	err := cmd.Run([]string{"--etcd-ca-file", "/ca.pem", "--etcd-username", "hermod"}, func(context.Context, *slog.Logger) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Etcd.TLS.CAFile != "/ca.pem" || cfg.Etcd.Username != "hermod" || cfg.Etcd.PasswordFile != "/run/secrets/etcd" || cfg.NATS.CredsFile != "/run/secrets/nats.creds" {
		t.Fatalf("config %+v %+v", cfg.Etcd, cfg.NATS)
	}
	cmd = NewCommand("hermod-test", &cfg, Flags{})
	cmd.SetOutput(io.Discard)
	if err := cmd.Run([]string{"--etcd-password", "x"}, func(context.Context, *slog.Logger) error { return nil }); err == nil {
		t.Fatal("--etcd-password accepted")
	}
}
