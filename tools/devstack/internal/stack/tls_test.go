package stack

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hermod/hermod/libs/bootstrap"
	"github.com/hermod/hermod/libs/bus"
	"github.com/hermod/hermod/libs/coord"
	"github.com/hermod/hermod/tools/devstack/stackstate"
)

// argValue returns the value following flag in args ("" if absent).
func argValue(args []string, flag string) string {
	if i := slices.Index(args, flag); i >= 0 && i+1 < len(args) {
		return args[i+1]
	}
	return ""
}

// --tls writes a CA, a certificate per identity (its spiffe URI) and
// 0600 password files, and hands each child its own identity's files, the
// hermod users and mutual TLS on gRPC; the state file carries hermodctl's
// settings by flag name.
func TestTLSFilesAndArgs(t *testing.T) {
	dir := t.TempDir()
	m, err := generateTLS(filepath.Join(dir, "tls"))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range tlsIdentities {
		f := m.Identities[id]
		b, err := os.ReadFile(f.Cert)
		if err != nil {
			t.Fatal(err)
		}
		blk, _ := pem.Decode(b)
		cert, err := x509.ParseCertificate(blk.Bytes)
		if err != nil || len(cert.URIs) != 1 || cert.URIs[0].String() != "spiffe://hermod/"+id {
			t.Errorf("%s: certificate %v, %v", id, cert.URIs, err)
		}
		if st, err := os.Stat(f.Key); err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s key: %v %v", id, st.Mode(), err)
		}
	}
	for _, p := range []string{m.NATSPasswordFile, m.EtcdPasswordFile, m.EtcdRootPasswordFile} {
		if st, err := os.Stat(p); err != nil || st.Mode().Perm() != 0o600 || st.Size() < 20 {
			t.Errorf("%s: %v, %v", p, st, err)
		}
	}
	s := &stack{o: Options{TLS: true}, tls: m, state: stackstate.State{PIDs: map[string]int{}}}
	picker := s.serviceArgs("picker", false)
	want := map[string]string{
		"--etcd-ca-file": m.CAFile, "--etcd-cert-file": m.Identities["picker"].Cert, "--etcd-username": "hermod", "--etcd-password-file": m.EtcdPasswordFile,
		"--nats-ca-file": m.CAFile, "--nats-key-file": m.Identities["picker"].Key, "--nats-user": "hermod", "--nats-password-file": m.NATSPasswordFile,
		"--grpc-tls-ca-file": m.CAFile, "--grpc-tls-cert-file": m.Identities["picker"].Cert, "--grpc-tls-key-file": m.Identities["picker"].Key, "--grpc-tls-client-auth": "require",
	}
	for flag, v := range want {
		if got := argValue(picker, flag); got != v {
			t.Errorf("picker %s = %q, want %q", flag, got, v)
		}
	}
	if sim := s.securityArgs("vllm-sim", true); argValue(sim, "--etcd-cert-file") != m.Identities["vllm-sim"].Cert || slices.ContainsFunc(sim, func(a string) bool { return strings.HasPrefix(a, "--nats") }) {
		t.Errorf("vllm-sim: %v", sim)
	}
	s.stateSecurity()
	for _, name := range []string{"etcd-ca-file", "etcd-cert-file", "etcd-key-file", "etcd-username", "etcd-password-file", "nats-ca-file", "nats-cert-file", "nats-key-file", "nats-user", "nats-password-file"} {
		if s.state.Security[name] == "" || !slices.Contains(slices.Concat(bootstrap.EtcdSecurityFlags, bootstrap.NATSSecurityFlags), name) {
			t.Errorf("state security %s = %q", name, s.state.Security[name])
		}
	}
	if s.state.Security["etcd-cert-file"] != m.Identities["hermodctl"].Cert || s.state.TLS.CAFile != m.CAFile || s.state.TLS.Identities["envoy"].KeyFile != m.Identities["envoy"].Key {
		t.Errorf("state: %v %+v", s.state.Security, s.state.TLS)
	}
	// the banner's hermodctl flags without a state file carry the settings
	s.state.NATSURL, s.state.EtcdEndpoints = "tls://127.0.0.1:1", []string{"https://127.0.0.1:2"}
	if f := s.ctlFlags(); !strings.Contains(f, "--etcd-endpoints https://127.0.0.1:2") || !strings.Contains(f, "--nats-password-file "+m.NATSPasswordFile) {
		t.Errorf("hermodctl flags %q", f)
	}
	// a reused directory keeps the passwords (etcd keeps its users)
	again, err := generateTLS(m.Dir)
	if err != nil || again.etcdPassword != m.etcdPassword || again.etcdRootPassword != m.etcdRootPassword {
		t.Errorf("passwords not kept: %v", err)
	}
	// without --tls nothing changes
	if args := (&stack{}).serviceArgs("picker", false); len(args) != 0 {
		t.Errorf("without --tls: %v", args)
	}
}

// The embedded servers under --tls: a client needs the CA, a client
// certificate and the hermod user; etcd's hermod user reaches /hermod/
// only.
func TestTLSServers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts embedded etcd and NATS (skipped with -short)")
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	s := &stack{o: Options{TLS: true, DataDir: t.TempDir(), SimBasePort: 1, KVBasePort: 1}, log: log, state: stackstate.State{PIDs: map[string]int{}}}
	t.Cleanup(func() {
		if err := s.shutdown(); err != nil {
			t.Error(err)
		}
	})
	if err := s.servers(ctx); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(s.state.NATSURL, "tls://") || !strings.HasPrefix(s.state.EtcdEndpoints[0], "https://") {
		t.Fatalf("urls %s %v", s.state.NATSURL, s.state.EtcdEndpoints)
	}
	cli, err := s.etcdSecurity("hermodctl").NewClient(ctx, s.state.EtcdEndpoints)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cli.Close() }()
	if _, err := cli.Put(ctx, coord.ConfigKey("p"), "x"); err != nil {
		t.Errorf("put under /hermod/: %v", err)
	}
	if _, err := cli.Put(ctx, "/elsewhere", "x"); err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Errorf("put outside /hermod/: %v", err)
	}
	noCert := s.etcdSecurity("hermodctl")
	noCert.TLS.CertFile, noCert.TLS.KeyFile = "", ""
	short, cancelShort := context.WithTimeout(ctx, 3*time.Second)
	defer cancelShort()
	if c, err := noCert.NewClient(short, s.state.EtcdEndpoints); err == nil {
		_ = c.Close()
		t.Error("etcd accepted a client without a certificate")
	}
	nc, err := s.natsSecurity("hermodctl").Connect(ctx, s.state.NATSURL, "test", bus.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()
	for name, sec := range map[string]bootstrap.NATSSecurity{
		"no password":    {TLS: s.tls.client("hermodctl")},
		"no certificate": {TLS: bootstrap.NATSSecurity{}.TLS, User: tlsUser, PasswordFile: s.tls.NATSPasswordFile},
	} {
		if name == "no certificate" {
			sec.TLS.CAFile = s.tls.CAFile
		}
		if nc, err := sec.Connect(short, s.state.NATSURL, "test", bus.WithLogger(log)); err == nil {
			nc.Close()
			t.Errorf("NATS accepted a client with %s", name)
		}
	}
}
