// Package kubeapi runs a real kube-apiserver for tests: the binary that
// `make kube-apiserver` builds from k8s.io/kubernetes (bin/kube-apiserver,
// see tools/kubeapiserver), over an embedded etcd (etcdembed), on a free
// loopback port, with RBAC authorization, admission and CRDs as in a
// cluster. No controller runs beside it: objects are stored and validated,
// but no pod is ever scheduled, no Deployment rolls out and no namespace is
// finalized.
//
// Start gives a test its own server; Shared gives the tests of one test
// binary one server between them (a start takes a few seconds). Either way:
//
//   - Config is the admin's client configuration (a client certificate of
//     the group system:masters, which RBAC lets do anything) and Kubeconfig
//     the same as a kubeconfig file, for helm or a service's --kubeconfig.
//   - AsUser and AsServiceAccount act as someone else through the admin's
//     impersonation: requests are authorized as that user (RBAC applies)
//     without a credential of theirs.
//   - ServiceAccountConfig authenticates as a ServiceAccount with a real
//     token from the TokenRequest API, as a pod's projected token does.
//
// Everything the server needs is generated: a CA, the serving certificate
// (localhost, 127.0.0.1, ::1), the admin's client certificate and the
// service-account signing key. The server's log is kept and returned with
// start-up errors (Output).
package kubeapi

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/hermod/hermod/testkit/certs"
	"github.com/hermod/hermod/testkit/childproc"
	"github.com/hermod/hermod/testkit/etcdembed"
)

// AdminUser is the user name of Config's client certificate; it is in the
// group system:masters.
const AdminUser = "hermod-test-admin"

// ServiceAccountIssuer is the issuer of the server's service-account tokens
// (and their audience).
const ServiceAccountIssuer = "https://kubernetes.default.svc.cluster.local"

// BinaryEnv names the environment variable that overrides the binary's
// path (default: bin/kube-apiserver at the repository root).
const BinaryEnv = "HERMOD_KUBE_APISERVER"

// DefaultStartTimeout bounds Run when its context has no deadline.
const DefaultStartTimeout = 90 * time.Second

// ErrNoBinary is returned by Run when the kube-apiserver binary is missing;
// `make kube-apiserver` builds it.
var ErrNoBinary = errors.New("kubeapi: no kube-apiserver binary")

// Options configures a server. The zero value is the usual one.
type Options struct {
	// Binary is the path of kube-apiserver; "" is $HERMOD_KUBE_APISERVER,
	// else bin/kube-apiserver at the repository root.
	Binary string
	// Args are further kube-apiserver flags, after the package's own (a
	// later flag wins): "--feature-gates=...", "--runtime-config=...".
	Args []string
}

// Server is a running kube-apiserver with its etcd. Its methods are safe
// for concurrent use.
type Server struct {
	dir        string // certificates, keys, the kubeconfig
	url        string // https://127.0.0.1:<port>
	kubeconfig string
	caPEM      []byte
	admin      *certs.KeyPair

	etcd *etcdembed.Server
	proc *childproc.Process

	closeOnce sync.Once
	closeErr  error
}

// startAttempts is how many ports Run tries: a free port can be taken by
// someone else before kube-apiserver binds it.
const startAttempts = 3

// Run starts etcd and kube-apiserver and waits until the API server is
// ready (/readyz: its own start-up hooks done, the built-in RBAC roles
// stored, the CRD and aggregation controllers synced) or ctx ends; without
// a deadline in ctx it waits DefaultStartTimeout at most. Close stops both.
func Run(ctx context.Context, opts Options) (_ *Server, err error) {
	bin, err := binary(opts.Binary)
	if err != nil {
		return nil, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultStartTimeout)
		defer cancel()
	}
	dir, err := os.MkdirTemp("", "hermod-kubeapi-")
	if err != nil {
		return nil, fmt.Errorf("kubeapi: %w", err)
	}
	s := &Server{dir: dir}
	defer func() {
		if err != nil {
			_ = s.Close()
		}
	}()
	files, err := s.writeCredentials()
	if err != nil {
		return nil, err
	}
	s.etcd, err = etcdembed.Start(ctx, etcdembed.Options{UnsafeNoFsync: true, CompactionRetention: -1})
	if err != nil {
		return nil, fmt.Errorf("kubeapi: %w", err)
	}
	for attempt := 1; ; attempt++ {
		port, perr := freePort()
		if perr != nil {
			return nil, fmt.Errorf("kubeapi: %w", perr)
		}
		s.url = "https://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		err = s.start(ctx, bin, append(args(files, port, s.etcd.ClientURLs()[0]), opts.Args...))
		if err == nil {
			break
		}
		if attempt == startAttempts || ctx.Err() != nil || !strings.Contains(err.Error(), "address already in use") {
			return nil, err
		}
	}
	if err := s.writeKubeconfig(); err != nil {
		return nil, err
	}
	return s, nil
}

// credentialFiles are the paths of the generated material.
type credentialFiles struct {
	ca, servingCert, servingKey, saKey, saPub string
}

// writeCredentials makes the CA, the serving and admin certificates and the
// service-account key, and writes the ones the server reads.
func (s *Server) writeCredentials() (credentialFiles, error) {
	f := credentialFiles{ca: filepath.Join(s.dir, "ca.crt"), saKey: filepath.Join(s.dir, "sa.key"), saPub: filepath.Join(s.dir, "sa.pub")}
	ca, err := certs.NewCA("hermod kube-apiserver CA")
	if err != nil {
		return f, fmt.Errorf("kubeapi: %w", err)
	}
	s.caPEM = ca.PEM
	if err := ca.WriteCA(f.ca); err != nil {
		return f, fmt.Errorf("kubeapi: %w", err)
	}
	serving, err := ca.Issue(certs.Leaf{
		Subject: pkix.Name{CommonName: "kube-apiserver"},
		DNS:     append([]string{"kubernetes", "kubernetes.default", "kubernetes.default.svc"}, certs.LoopbackDNS...),
		IPs:     certs.LoopbackIPs,
		Server:  true,
	})
	if err != nil {
		return f, fmt.Errorf("kubeapi: serving certificate: %w", err)
	}
	sf, err := serving.Write(s.dir, "serving")
	if err != nil {
		return f, fmt.Errorf("kubeapi: %w", err)
	}
	f.servingCert, f.servingKey = sf.Cert, sf.Key
	// The same CA verifies client certificates: the subject's CN is the
	// user, its O the groups.
	s.admin, err = ca.Issue(certs.Leaf{
		Subject: pkix.Name{CommonName: AdminUser, Organization: []string{"system:masters"}},
		Client:  true,
	})
	if err != nil {
		return f, fmt.Errorf("kubeapi: admin certificate: %w", err)
	}
	if err := writeServiceAccountKey(f.saKey, f.saPub); err != nil {
		return f, fmt.Errorf("kubeapi: service-account key: %w", err)
	}
	return f, nil
}

// writeServiceAccountKey writes a new ECDSA P-256 key (tokens are ES256)
// and its public half.
func writeServiceAccountKey(keyPath, pubPath string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return err
	}
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return err
	}
	return os.WriteFile(pubPath, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o644)
}

// args are kube-apiserver's flags: loopback only, RBAC, no endpoint
// reconciler (it would publish 127.0.0.1 as the kubernetes Service's
// endpoint, which validation refuses).
func args(f credentialFiles, port int, etcdURL string) []string {
	return []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--tls-cert-file=" + f.servingCert,
		"--tls-private-key-file=" + f.servingKey,
		"--client-ca-file=" + f.ca,
		"--authorization-mode=RBAC",
		"--service-account-issuer=" + ServiceAccountIssuer,
		"--service-account-key-file=" + f.saPub,
		"--service-account-signing-key-file=" + f.saKey,
		"--service-cluster-ip-range=10.0.0.0/24",
		"--endpoint-reconciler-type=none",
		"--cert-dir=" + filepath.Dir(f.ca),
		"--profiling=false",
		"--v=0",
	}
}

// start runs the binary and waits for /readyz.
func (s *Server) start(ctx context.Context, bin string, args []string) error {
	cmd := exec.Command(bin, args...)
	cmd.Dir = s.dir
	setParentDeathSignal(cmd)
	deadline, _ := ctx.Deadline()
	client, err := s.httpClient()
	if err != nil {
		return err
	}
	defer client.CloseIdleConnections()
	ready := func() error {
		if err := ctx.Err(); err != nil {
			return err
		}
		return readyz(ctx, client, s.url)
	}
	proc, err := childproc.Start(cmd, ready, time.Until(deadline))
	if err != nil {
		return fmt.Errorf("kubeapi: start kube-apiserver: %w", err)
	}
	s.proc = proc
	return nil
}

// readyz is nil once GET /readyz answers 200.
func readyz(ctx context.Context, c *http.Client, url string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/readyz", nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		// The body lists the checks that fail.
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return fmt.Errorf("/readyz: %s: %s", resp.Status, body)
	}
	return nil
}

// httpClient is an admin HTTPS client of its own (closed by the caller).
func (s *Server) httpClient() (*http.Client, error) {
	cert, err := s.admin.TLS()
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(s.caPEM)
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12,
	}}}, nil
}

// writeKubeconfig writes the admin's kubeconfig (credentials inline).
func (s *Server) writeKubeconfig() error {
	const name = "hermod-test"
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[name] = &clientcmdapi.Cluster{Server: s.url, CertificateAuthorityData: s.caPEM}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{ClientCertificateData: s.admin.CertPEM, ClientKeyData: s.admin.KeyPEM}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name, Namespace: metav1.NamespaceDefault}
	cfg.CurrentContext = name
	s.kubeconfig = filepath.Join(s.dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, s.kubeconfig); err != nil {
		return fmt.Errorf("kubeapi: write kubeconfig: %w", err)
	}
	return nil
}

// URL is the server's https://127.0.0.1:<port>.
func (s *Server) URL() string { return s.url }

// CAPEM is the PEM of the CA that signed the serving certificate.
func (s *Server) CAPEM() []byte { return s.caPEM }

// Kubeconfig is the path of a kubeconfig file whose current context is the
// admin's, namespace "default". It is removed by Close.
func (s *Server) Kubeconfig() string { return s.kubeconfig }

// Output is what kube-apiserver has logged so far.
func (s *Server) Output() string { return s.proc.Output() }

// Config returns a new admin client configuration (user AdminUser, group
// system:masters), with client-side rate limits raised for tests.
func (s *Server) Config() *rest.Config {
	return &rest.Config{
		Host: s.url,
		TLSClientConfig: rest.TLSClientConfig{
			CAData: s.caPEM, CertData: s.admin.CertPEM, KeyData: s.admin.KeyPEM,
		},
		QPS: 200, Burst: 400,
		UserAgent: "hermod-kubeapi-test",
	}
}

// AsUser returns a configuration whose requests are authorized as user in
// groups (impersonation by the admin). Without groups, the server adds
// system:authenticated, and for a service account's user name its groups.
func (s *Server) AsUser(user string, groups ...string) *rest.Config {
	cfg := s.Config()
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
	return cfg
}

// ServiceAccountUser is the user name of a ServiceAccount:
// system:serviceaccount:<namespace>:<name>.
func ServiceAccountUser(namespace, name string) string {
	return "system:serviceaccount:" + namespace + ":" + name
}

// AsServiceAccount returns a configuration that acts as the ServiceAccount
// namespace/name (which need not exist) through impersonation: RBAC sees
// its user and groups (system:serviceaccounts,
// system:serviceaccounts:<namespace>, system:authenticated).
func (s *Server) AsServiceAccount(namespace, name string) *rest.Config {
	return s.AsUser(ServiceAccountUser(namespace, name))
}

// ServiceAccountConfig returns a configuration that authenticates as the
// existing ServiceAccount namespace/name with a bearer token the
// TokenRequest API issues (valid for an hour), as a pod's projected token
// does; nothing of the admin's is in it.
func (s *Server) ServiceAccountConfig(ctx context.Context, namespace, name string) (*rest.Config, error) {
	cs, err := kubernetes.NewForConfig(s.Config())
	if err != nil {
		return nil, fmt.Errorf("kubeapi: %w", err)
	}
	ttl := int64(time.Hour / time.Second)
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &ttl}}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("kubeapi: token of service account %s/%s: %w", namespace, name, err)
	}
	return &rest.Config{
		Host:            s.url,
		TLSClientConfig: rest.TLSClientConfig{CAData: s.caPEM},
		BearerToken:     tr.Status.Token,
		QPS:             200, Burst: 400,
		UserAgent: "hermod-kubeapi-test",
	}, nil
}

// Close stops kube-apiserver (killed: nothing of it needs to survive) and
// etcd, and removes the generated files. Calls after the first return the
// first's result.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		if s.proc != nil {
			s.proc.Kill()
		}
		var errs []error
		if s.etcd != nil {
			errs = append(errs, s.etcd.Close())
		}
		errs = append(errs, os.RemoveAll(s.dir))
		if err := errors.Join(errs...); err != nil {
			s.closeErr = fmt.Errorf("kubeapi: close: %w", err)
		}
	})
	return s.closeErr
}

// binary finds kube-apiserver: path, else $HERMOD_KUBE_APISERVER, else
// bin/kube-apiserver at the repository root.
func binary(path string) (string, error) {
	if path == "" {
		path = os.Getenv(BinaryEnv)
	}
	if path == "" {
		_, file, _, ok := runtime.Caller(0)
		if !ok {
			return "", fmt.Errorf("%w: cannot locate the repository; set %s", ErrNoBinary, BinaryEnv)
		}
		path = filepath.Join(filepath.Dir(file), "..", "..", "bin", "kube-apiserver")
	}
	fi, err := os.Stat(path)
	if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		return "", fmt.Errorf("%w at %s (`make kube-apiserver` builds it; $%s overrides the path)", ErrNoBinary, filepath.Clean(path), BinaryEnv)
	}
	return path, nil
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}
