package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/hermod/hermod/libs/coord"
	"github.com/hermod/hermod/libs/tlsconfig"
	"github.com/hermod/hermod/testkit/certs"
	"github.com/hermod/hermod/testkit/etcdembed"
)

// secureEtcd runs etcd with TLS, client certificates and RBAC (the user
// hermod on /hermod/) holding a config for pool p; the certificates are in
// dir: ca.crt, server.crt/key, ctl.crt/key.
func secureEtcd(t *testing.T, dir, password string) *etcdembed.Server {
	t.Helper()
	if testing.Short() {
		t.Skip("starts an etcd server; skipped with -short")
	}
	ca, err := certs.NewCA("hermod test CA")
	if err != nil {
		t.Fatal(err)
	}
	if err := ca.WriteCA(filepath.Join(dir, "ca.crt")); err != nil {
		t.Fatal(err)
	}
	srvPair, err := ca.Server("etcd")
	if err != nil {
		t.Fatal(err)
	}
	srvFiles, err := srvPair.Write(dir, "server")
	if err != nil {
		t.Fatal(err)
	}
	ctlPair, err := ca.Client("hermodctl")
	if err != nil {
		t.Fatal(err)
	}
	ctlFiles, err := ctlPair.Write(dir, "ctl")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	srv, err := etcdembed.Start(ctx, etcdembed.Options{UnsafeNoFsync: true, CompactionRetention: -1,
		ClientTLS: &etcdembed.TLSFiles{CertFile: srvFiles.Cert, KeyFile: srvFiles.Key, TrustedCAFile: filepath.Join(dir, "ca.crt"), ClientCertAuth: true}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	tlsCfg, err := tlsconfig.ClientFiles{CAFile: filepath.Join(dir, "ca.crt"), CertFile: ctlFiles.Cert, KeyFile: ctlFiles.Key}.Config()
	if err != nil {
		t.Fatal(err)
	}
	admin, err := clientv3.New(clientv3.Config{Endpoints: srv.ClientURLs(), TLS: tlsCfg, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = admin.Close() }()
	if _, err := coord.PutConfig(ctx, admin, "p", []byte("plugins: [{type: queue-scorer}]\n")); err != nil {
		t.Fatal(err)
	}
	if err := etcdembed.SetupAuth(ctx, admin, "root-pw", etcdembed.User{Name: "hermod", Password: password, Prefix: "/hermod/"}); err != nil {
		t.Fatal(err)
	}
	return srv
}

// hermodctl reaches an etcd with TLS, client certificates and RBAC through
// its security flags, before the command or in a context file (files
// relative to it; the password from HERMOD_ETCD_PASSWORD or a file), and
// is refused without them.
func TestSecureEtcdFlagsAndContext(t *testing.T) {
	dir := t.TempDir()
	const password = "ctl-pass-c41"
	srv := secureEtcd(t, dir, password)
	eps := strings.Join(srv.ClientURLs(), ",")
	pwFile := filepath.Join(dir, "etcd-password")
	if err := os.WriteFile(pwFile, []byte(password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HERMOD_CONTEXT", "")
	t.Setenv("XDG_CONFIG_HOME", t.TempDir()) // no default context
	if _, errs, code := run("--etcd-endpoints", eps, "config", "get", "--pool", "p"); code != ExitFailure || !strings.Contains(errs, "etcd") {
		t.Fatalf("without TLS settings: %d %q", code, errs)
	}
	tlsFlags := []string{"--etcd-endpoints", eps, "--etcd-ca-file", filepath.Join(dir, "ca.crt"), "--etcd-cert-file", filepath.Join(dir, "ctl.crt"), "--etcd-key-file", filepath.Join(dir, "ctl.key")}
	if _, errs, code := run(append(tlsFlags, "config", "get", "--pool", "p")...); code != ExitFailure {
		t.Fatalf("without credentials: %d %q", code, errs)
	}
	args := append(append(tlsFlags, "--etcd-username", "hermod", "--etcd-password-file", pwFile), "config", "get", "--pool", "p")
	if out, errs, code := run(args...); code != ExitOK || !strings.Contains(out, "queue-scorer") {
		t.Fatalf("global flags: %d %q %q", code, out, errs)
	}
	ctxFile := filepath.Join(dir, "context")
	body := "pool: p\netcd-endpoints: [" + eps + "]\netcd-ca-file: ca.crt\netcd-cert-file: ctl.crt\netcd-key-file: ctl.key\netcd-username: hermod\n"
	if err := os.WriteFile(ctxFile, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HERMOD_CONTEXT", ctxFile)
	t.Setenv("HERMOD_ETCD_PASSWORD", password)
	if out, errs, code := run("config", "get"); code != ExitOK || !strings.Contains(out, "queue-scorer") {
		t.Fatalf("context file: %d %q %q", code, out, errs)
	}
	if err := os.WriteFile(ctxFile, []byte(body+"etcd-password: "+password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, errs, code := run("config", "get"); code == ExitOK || !strings.Contains(errs, `unknown setting "etcd-password"`) || strings.Contains(errs, password) {
		t.Fatalf("a password in the context file: %d %q", code, errs)
	}
}
