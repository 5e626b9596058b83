package tiered

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/hermod/hermod/testkit/certs"
	"github.com/hermod/hermod/testkit/mongotest"
	"github.com/hermod/hermod/testkit/redistest"
)

// testPKI is a CA with a loopback server certificate and a client
// certificate, and a client certificate of another CA, in a directory.
type testPKI struct {
	ca             string
	server, client certs.Files
	other          certs.Files
}

func newTestPKI(t *testing.T) testPKI {
	t.Helper()
	dir := t.TempDir()
	issue := func(ca *certs.CA, name string, server bool) certs.Files {
		kp, err := ca.Client(name)
		if server {
			kp, err = ca.Server(name)
		}
		if err != nil {
			t.Fatal(err)
		}
		f, err := kp.Write(dir, name)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	ca, err := certs.NewCA("hermod test CA")
	if err != nil {
		t.Fatal(err)
	}
	other, err := certs.NewCA("another CA")
	if err != nil {
		t.Fatal(err)
	}
	p := testPKI{ca: filepath.Join(dir, "ca.crt")}
	if err := ca.WriteCA(p.ca); err != nil {
		t.Fatal(err)
	}
	p.server, p.client, p.other = issue(ca, "server", true), issue(ca, "responses", false), issue(other, "other", false)
	return p
}

func secretFile(t *testing.T, value string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(p, []byte(value+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// A Redis that speaks TLS only, verifies client certificates and has ACL
// users (the default user off): the store connects with the CA, a client
// certificate and the user's password from a file or the environment,
// and is refused without any one of them.
func TestRedisTLSAndACLUser(t *testing.T) {
	p := newTestPKI(t)
	const password = "redis-pass-3b1d"
	srv := redistest.StartTLS(t, redistest.TLS{CertFile: p.server.Cert, KeyFile: p.server.Key, CAFile: p.ca, AuthClients: true},
		"--user", "default", "off", "--user", "hermod", "on", ">"+password, "~*", "&*", "+@all")
	tlsBlock := func(cert certs.Files, ca string) string {
		return fmt.Sprintf(`{"caFile":%q,"certFile":%q,"keyFile":%q}`, ca, cert.Cert, cert.Key)
	}
	good := tlsBlock(p.client, p.ca)
	pwFile := secretFile(t, password)
	for _, tc := range []struct {
		name, redis string
		env         string
		refuse      bool
	}{
		{name: "system roots only", redis: fmt.Sprintf(`"username":"hermod","passwordFile":%q`, pwFile), refuse: true},
		{name: "no client certificate", redis: fmt.Sprintf(`"username":"hermod","passwordFile":%q,"tls":{"caFile":%q}`, pwFile, p.ca), refuse: true},
		{name: "another CA's certificate", redis: fmt.Sprintf(`"username":"hermod","passwordFile":%q,"tls":%s`, pwFile, tlsBlock(p.other, p.ca)), refuse: true},
		{name: "no password", redis: `"tls":` + good, refuse: true},
		{name: "wrong password", redis: fmt.Sprintf(`"username":"hermod","passwordFile":%q,"tls":%s`, secretFile(t, "nope"), good), refuse: true},
		{name: "password file", redis: fmt.Sprintf(`"username":"hermod","passwordFile":%q,"tls":%s`, pwFile, good)},
		{name: "password from the environment", redis: `"username":"hermod","passwordEnv":"HERMOD_TEST_REDIS_PASSWORD","tls":` + good, env: password},
		{name: "environment variable unset", redis: `"username":"hermod","passwordEnv":"HERMOD_TEST_REDIS_UNSET","tls":` + good, refuse: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env != "" {
				t.Setenv("HERMOD_TEST_REDIS_PASSWORD", tc.env)
			}
			cfg := config(t, fmt.Sprintf(`{"tieredConfig":{"redis":{"address":%q,%s}}}`, srv.URL(), tc.redis))
			s, err := New(t.Context(), cfg, Options{Consumer: "test"})
			if tc.refuse {
				if err == nil {
					_ = s.Close()
					t.Fatal("connected")
				}
				if strings.Contains(err.Error(), password) {
					t.Fatalf("the error shows the password: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = s.Close() }()
			if err := s.Put(t.Context(), rec("resp_tls", "", "over TLS")); err != nil {
				t.Fatal(err)
			}
			if who, _ := s.rdb.Do(t.Context(), s.rdb.B().AclWhoami().Build()).ToString(); who != "hermod" {
				t.Fatalf("connected as %q", who)
			}
		})
	}
}

// A MongoDB wire-protocol server that speaks TLS only and requires client
// certificates: tier 2 reaches it with the tls block's CA and certificate
// and not without. (FerretDB v1 embedded has no authentication of its
// own, so credentials are checked in TestMongoCredentialsApplied.)
func TestMongoTLS(t *testing.T) {
	p := newTestPKI(t)
	srv := mongotest.RunTLS(t, mongotest.TLS{CertFile: p.server.Cert, KeyFile: p.server.Key, CAFile: p.ca})
	log := slog.New(slog.DiscardHandler)
	for _, tc := range []struct {
		name, tls string
		refuse    bool
	}{
		{name: "system roots only", tls: `{}`, refuse: true},
		{name: "no client certificate", tls: fmt.Sprintf(`{"caFile":%q}`, p.ca), refuse: true},
		{name: "another CA's certificate", tls: fmt.Sprintf(`{"caFile":%q,"certFile":%q,"keyFile":%q}`, p.ca, p.other.Cert, p.other.Key), refuse: true},
		{name: "CA and client certificate", tls: fmt.Sprintf(`{"caFile":%q,"certFile":%q,"keyFile":%q}`, p.ca, p.client.Cert, p.client.Key)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// A refused handshake fails at once, but the driver keeps
			// selecting a server until the operation's deadline (5 and 10
			// times the timeout, for the index and the count): the refused
			// cases wait 4.5 s, not 30 s. (The accepted case counts in
			// milliseconds, so 3 s would still tell an accepted one.)
			timeout := "2s"
			if tc.refuse {
				timeout = "300ms"
			}
			cfg := config(t, fmt.Sprintf(`{"tieredConfig":{"redis":{"address":"redis://127.0.0.1:1"},"mongo":{"uri":%q,"timeout":%q,"tls":%s}}}`, srv.URI(), timeout, tc.tls))
			m, err := openMongo(t.Context(), cfg.Mongo, log)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = m.client.Disconnect(context.Background()) }()
			_, err = m.count(t.Context())
			if tc.refuse != (err != nil) {
				t.Fatalf("count: %v (refusal expected: %v)", err, tc.refuse)
			}
			if err != nil {
				t.Logf("refused: %v", err)
			}
		})
	}
}

// The mongo section's username and password (file or environment) reach
// the driver over the URI's, keeping its authSource; skipping
// verification is refused.
func TestMongoCredentialsApplied(t *testing.T) {
	t.Setenv("HERMOD_TEST_MONGO_PASSWORD", "from-env")
	file := secretFile(t, "from-file")
	for _, tc := range []struct {
		name                   string
		mongo                  string
		user, password, errHas string
		authSource             string
	}{
		{name: "file", mongo: fmt.Sprintf(`"uri":"mongodb://olduser@m/?authSource=admin","username":"hermod","passwordFile":%q`, file), user: "hermod", password: "from-file", authSource: "admin"},
		{name: "environment, user from the uri", mongo: `"uri":"mongodb://hermod@m/","passwordEnv":"HERMOD_TEST_MONGO_PASSWORD"`, user: "hermod", password: "from-env", authSource: "admin"},
		{name: "no user anywhere", mongo: `"uri":"mongodb://m/","passwordEnv":"HERMOD_TEST_MONGO_PASSWORD"`, errHas: "without a user name"},
		{name: "unset variable", mongo: `"uri":"mongodb://m/","username":"u","passwordEnv":"HERMOD_TEST_MONGO_UNSET"`, errHas: "HERMOD_TEST_MONGO_UNSET is not set"},
		{name: "insecure uri", mongo: `"uri":"mongodb://m/?tls=true&tlsInsecure=true"`, errHas: "not allowed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config(t, fmt.Sprintf(`{"tieredConfig":{"redis":{"address":"redis://127.0.0.1:1"},"mongo":{%s}}}`, tc.mongo))
			opts := options.Client().ApplyURI(cfg.Mongo.URI)
			err := mongoSecurity(opts, cfg.Mongo)
			if tc.errHas != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errHas) {
					t.Fatalf("err = %v, want %q", err, tc.errHas)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if a := opts.Auth; a == nil || a.Username != tc.user || a.Password != tc.password || !a.PasswordSet || a.AuthSource != tc.authSource {
				t.Fatalf("auth %+v", a)
			}
		})
	}
}
