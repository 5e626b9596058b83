package stack

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/hermod/hermod/libs/bootstrap"
	"github.com/hermod/hermod/libs/coord"
	"github.com/hermod/hermod/libs/tlsconfig"
	"github.com/hermod/hermod/testkit/certs"
	"github.com/hermod/hermod/testkit/etcdembed"
	"github.com/hermod/hermod/tools/devstack/stackstate"
)

// Identities devstack --tls issues a certificate to (spiffe://hermod/<name>,
// server and client usages): the services, the simulator, devstack itself,
// hermodctl, and envoy for ext_proc clients such as the e2e's stand-in.
// Picker replicas share one.
var tlsIdentities = []string{"gateway", "picker", "indexer", "responses", "collector", "autoscaler", "vllm-sim", "devstack", "hermodctl", "envoy"}

// The etcd and NATS user every Hermod process of a --tls stack is (etcd:
// read-write on coord's /hermod/ keys; NATS: everything, JetStream too).
const (
	tlsUser       = "hermod"
	etcdKeyPrefix = "/hermod/"
)

// tlsMaterial is what --tls writes under <data-dir>/tls: a CA, a
// certificate per identity, the NATS and etcd server certificates and the
// users' passwords (files of mode 0600).
type tlsMaterial struct {
	Dir        string
	CAFile     string
	Identities map[string]certs.Files
	NATSServer certs.Files
	EtcdServer certs.Files
	// Password files and the passwords read from them (the servers are
	// configured with the values).
	NATSPasswordFile, EtcdPasswordFile, EtcdRootPasswordFile string
	natsPassword, etcdPassword, etcdRootPassword             string
}

// generateTLS writes a new CA and certificates into dir (made 0700). The
// passwords are kept when their files exist (a --data-dir reused: etcd
// keeps its users), else made at random.
func generateTLS(dir string) (*tlsMaterial, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("--tls: %w", err)
	}
	ca, err := certs.NewCA("hermod-devstack CA")
	if err != nil {
		return nil, fmt.Errorf("--tls: %w", err)
	}
	m := &tlsMaterial{Dir: dir, CAFile: filepath.Join(dir, "ca.crt"), Identities: map[string]certs.Files{}}
	if err := ca.WriteCA(m.CAFile); err != nil {
		return nil, fmt.Errorf("--tls: %w", err)
	}
	issue := func(service, name string) (certs.Files, error) {
		kp, err := ca.Server(service)
		if err != nil {
			return certs.Files{}, fmt.Errorf("--tls: certificate of %s: %w", service, err)
		}
		f, err := kp.Write(dir, name)
		if err != nil {
			return certs.Files{}, fmt.Errorf("--tls: %w", err)
		}
		f.CA = m.CAFile
		return f, nil
	}
	for _, id := range tlsIdentities {
		if m.Identities[id], err = issue(id, id); err != nil {
			return nil, err
		}
	}
	if m.NATSServer, err = issue("nats", "nats-server"); err != nil {
		return nil, err
	}
	if m.EtcdServer, err = issue("etcd", "etcd-server"); err != nil {
		return nil, err
	}
	for _, p := range []struct {
		file  *string
		value *string
		name  string
	}{{&m.NATSPasswordFile, &m.natsPassword, "nats-password"}, {&m.EtcdPasswordFile, &m.etcdPassword, "etcd-password"}, {&m.EtcdRootPasswordFile, &m.etcdRootPassword, "etcd-root-password"}} {
		*p.file = filepath.Join(dir, p.name)
		if *p.value, err = passwordFile(*p.file); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// passwordFile returns the password in path, writing a random one there
// (mode 0600) when there is none.
func passwordFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err == nil && len(strings.TrimSpace(string(b))) > 0 {
		return strings.TrimSpace(string(b)), nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("--tls: %w", err)
	}
	raw := make([]byte, 24)
	if _, err := rand.Read(raw); err != nil {
		return "", fmt.Errorf("--tls: random password: %w", err)
	}
	pw := base64.RawURLEncoding.EncodeToString(raw)
	if err := os.WriteFile(path, []byte(pw+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("--tls: %w", err)
	}
	return pw, nil
}

// client is an identity's TLS client files.
func (m *tlsMaterial) client(identity string) tlsconfig.ClientFiles {
	f := m.Identities[identity]
	return tlsconfig.ClientFiles{CAFile: m.CAFile, CertFile: f.Cert, KeyFile: f.Key}
}

// etcdServerTLS is the embedded etcd's client listener: TLS, a client
// certificate required.
func (m *tlsMaterial) etcdServerTLS() *etcdembed.TLSFiles {
	return &etcdembed.TLSFiles{CertFile: m.EtcdServer.Cert, KeyFile: m.EtcdServer.Key, TrustedCAFile: m.CAFile, ClientCertAuth: true}
}

// natsServerTLS is the embedded NATS's TLS: client certificates the CA
// signed required and verified.
func (m *tlsMaterial) natsServerTLS() (*tls.Config, error) {
	cfg, err := tlsconfig.ClientFiles{CAFile: m.CAFile, CertFile: m.NATSServer.Cert, KeyFile: m.NATSServer.Key}.Config()
	if err != nil {
		return nil, fmt.Errorf("--tls: nats server: %w", err)
	}
	cfg.ClientCAs, cfg.RootCAs = cfg.RootCAs, nil
	cfg.ClientAuth = tls.RequireAndVerifyClientCert
	return cfg, nil
}

// natsUsers is the embedded NATS's one user (every permission: the
// services publish, consume and manage JetStream streams).
func (m *tlsMaterial) natsUsers() []*server.User {
	return []*server.User{{Username: tlsUser, Password: m.natsPassword}}
}

// setupEtcdAuth turns on etcd's RBAC unless it is on already (a reused
// --data-dir): root with the root password, and the hermod user with
// read-write on /hermod/.
func (m *tlsMaterial) setupEtcdAuth(ctx context.Context, endpoints []string) error {
	cfg, err := m.client("devstack").Config()
	if err != nil {
		return fmt.Errorf("--tls: etcd client: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	// As root: the client goes on without a token while auth is off.
	cli, err := coord.NewClient(ctx, endpoints, coord.WithTLS(cfg), coord.WithCredentials("root", m.etcdRootPassword))
	if err != nil {
		return fmt.Errorf("--tls: etcd as root (a --data-dir of another run? its %s must match): %w", m.EtcdRootPasswordFile, err)
	}
	defer func() { _ = cli.Close() }()
	st, err := cli.AuthStatus(ctx)
	if err != nil {
		return fmt.Errorf("--tls: etcd auth status: %w", err)
	}
	if st.Enabled {
		return nil
	}
	if err := etcdembed.SetupAuth(ctx, cli, m.etcdRootPassword, etcdembed.User{Name: tlsUser, Password: m.etcdPassword, Prefix: etcdKeyPrefix}); err != nil {
		return fmt.Errorf("--tls: %w", err)
	}
	return nil
}

// etcdSecurity is how identity reaches etcd: the generated material for
// the embedded etcd under --tls, else devstack's --etcd-* flags.
func (s *stack) etcdSecurity(identity string) bootstrap.EtcdSecurity {
	if s.tls == nil || len(s.o.EtcdEndpoints) > 0 {
		return s.o.Etcd
	}
	return bootstrap.EtcdSecurity{TLS: s.tls.client(identity), Username: tlsUser, PasswordFile: s.tls.EtcdPasswordFile}
}

// natsSecurity is how identity reaches NATS: the generated material for
// the embedded NATS under --tls, else devstack's --nats-* flags.
func (s *stack) natsSecurity(identity string) bootstrap.NATSSecurity {
	if s.tls == nil || s.o.NATSURL != "" {
		return s.o.NATS
	}
	return bootstrap.NATSSecurity{TLS: s.tls.client(identity), User: tlsUser, PasswordFile: s.tls.NATSPasswordFile}
}

// grpcArgs are a service's gRPC TLS flags under --tls: its identity's
// certificate, client certificates required (the default authorisation
// policy then applies). None without --tls.
func (s *stack) grpcArgs(identity string) []string {
	if s.tls == nil {
		return nil
	}
	f := s.tls.Identities[identity]
	return []string{"--grpc-tls-ca-file", s.tls.CAFile, "--grpc-tls-cert-file", f.Cert, "--grpc-tls-key-file", f.Key, "--grpc-tls-client-auth", "require"}
}

// serviceArgs are a Hermod service's etcd, NATS and gRPC security flags as
// identity.
func (s *stack) serviceArgs(identity string, etcdOnly bool) []string {
	return append(s.securityArgs(identity, etcdOnly), s.grpcArgs(identity)...)
}

// stateSecurity fills the state file's security sections: hermodctl's
// flags by name, the CA and every identity's certificate.
func (s *stack) stateSecurity() {
	if s.tls == nil {
		return
	}
	s.state.Security = map[string]string{}
	args := s.securityArgs("hermodctl", false)
	for i := 0; i+1 < len(args); i += 2 {
		s.state.Security[strings.TrimPrefix(args[i], "--")] = args[i+1]
	}
	s.state.TLS = &stackstate.TLS{CAFile: s.tls.CAFile, Identities: map[string]stackstate.CertFiles{}}
	for id, f := range s.tls.Identities {
		s.state.TLS.Identities[id] = stackstate.CertFiles{CertFile: f.Cert, KeyFile: f.Key}
	}
}
