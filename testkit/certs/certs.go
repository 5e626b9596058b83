// Package certs makes X.509 material for tests and the devstack: a CA,
// server certificates for loopback (DNS localhost, IPs 127.0.0.1 and ::1)
// and client certificates, each carrying a Hermod identity.
//
// The identity scheme is grpcauthz's: a URI SAN spiffe://hermod/<service>
// (service: gateway, picker, indexer, responses, collector, autoscaler,
// envoy, ...), with the subject CN hermod-<service> for humans reading
// the certificate. Keys are ECDSA P-256 (fast to make, the common choice
// of cert-manager issuers).
package certs

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"time"
)

// TrustDomain is the host of every identity URI: spiffe://hermod/<service>.
const TrustDomain = "hermod"

// IdentityURI is the URI SAN of a service's identity.
func IdentityURI(service string) *url.URL {
	return &url.URL{Scheme: "spiffe", Host: TrustDomain, Path: "/" + service}
}

// DefaultValidity is how long issued certificates and CAs are valid.
const DefaultValidity = 24 * time.Hour

// CA is a certificate authority: a self-signed certificate and its key.
type CA struct {
	Cert *x509.Certificate
	Key  crypto.Signer
	// PEM is the certificate, PEM-encoded (the CA bundle file's content).
	PEM []byte
}

// KeyPair is an issued certificate and its key, PEM-encoded and parsed.
type KeyPair struct {
	Cert    *x509.Certificate
	CertPEM []byte
	KeyPEM  []byte
}

// Leaf describes a certificate to issue.
type Leaf struct {
	// Service is the identity (spiffe://hermod/<Service>, CN
	// hermod-<Service>); empty: no identity URI, CN "hermod-anonymous".
	Service string
	DNS     []string
	IPs     []net.IP
	// Server and Client set the extended key usages.
	Server, Client bool
	// Subject, when it has a CommonName, replaces the subject the identity
	// gives (CN hermod-<Service>, O "Hermod test"): for peers that read
	// the subject, as kube-apiserver reads a client certificate's CN as the
	// user name and its O as the groups.
	Subject pkix.Name
	// NotBefore and NotAfter default to now-1m and now+DefaultValidity.
	NotBefore, NotAfter time.Time
}

// NewCA makes a self-signed CA named cn.
func NewCA(cn string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate CA key: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: cn, Organization: []string{"Hermod test"}},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(DefaultValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("self-sign CA %s: %w", cn, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse CA %s: %w", cn, err)
	}
	return &CA{Cert: cert, Key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// Pool is a certificate pool holding the CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// TLS is the pair as a tls.Certificate.
func (kp *KeyPair) TLS() (tls.Certificate, error) {
	c, err := tls.X509KeyPair(kp.CertPEM, kp.KeyPEM)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("certs: key pair: %w", err)
	}
	return c, nil
}

// Issue signs a certificate for l.
func (ca *CA) Issue(l Leaf) (*KeyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate key: %w", err)
	}
	now := time.Now()
	if l.NotBefore.IsZero() {
		l.NotBefore = now.Add(-time.Minute)
	}
	if l.NotAfter.IsZero() {
		l.NotAfter = now.Add(DefaultValidity)
	}
	cn := "hermod-anonymous"
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		NotBefore:    l.NotBefore,
		NotAfter:     l.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		DNSNames:     l.DNS,
		IPAddresses:  l.IPs,
	}
	if l.Service != "" {
		cn = "hermod-" + l.Service
		tmpl.URIs = []*url.URL{IdentityURI(l.Service)}
	}
	tmpl.Subject = pkix.Name{CommonName: cn, Organization: []string{"Hermod test"}}
	if l.Subject.CommonName != "" {
		tmpl.Subject, cn = l.Subject, l.Subject.CommonName
	}
	if l.Server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	if l.Client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		return nil, fmt.Errorf("sign certificate for %s: %w", cn, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse certificate for %s: %w", cn, err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encode key for %s: %w", cn, err)
	}
	return &KeyPair{
		Cert:    cert,
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

// Loopback are the names a server on this host is reached by.
var (
	LoopbackDNS = []string{"localhost"}
	LoopbackIPs = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
)

// Server issues a certificate of service for a server on loopback; it may
// also be used as the service's client certificate (a picker serves the
// gateway and calls the indexer with one certificate).
func (ca *CA) Server(service string) (*KeyPair, error) {
	return ca.Issue(Leaf{Service: service, DNS: LoopbackDNS, IPs: LoopbackIPs, Server: true, Client: true})
}

// Client issues a client certificate of service.
func (ca *CA) Client(service string) (*KeyPair, error) {
	return ca.Issue(Leaf{Service: service, Client: true})
}

// Files are the paths of written material.
type Files struct {
	CA, Cert, Key string
}

// WriteCA writes the CA certificate to path (mode 0644).
func (ca *CA) WriteCA(path string) error {
	if err := writeFile(path, ca.PEM, 0o644); err != nil {
		return fmt.Errorf("write CA: %w", err)
	}
	return nil
}

// Write writes the pair to dir/<name>.crt and dir/<name>.key (mode 0600)
// and returns their paths (CA empty).
func (kp *KeyPair) Write(dir, name string) (Files, error) {
	f := Files{Cert: filepath.Join(dir, name+".crt"), Key: filepath.Join(dir, name+".key")}
	if err := writeFile(f.Cert, kp.CertPEM, 0o644); err != nil {
		return Files{}, fmt.Errorf("write certificate %s: %w", name, err)
	}
	if err := writeFile(f.Key, kp.KeyPEM, 0o600); err != nil {
		return Files{}, fmt.Errorf("write key %s: %w", name, err)
	}
	return f, nil
}

// writeFile replaces path atomically (a rename), as cert-manager's
// in-place rotation and kubelet's symlink swap both appear to readers.
func writeFile(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path))
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		panic(fmt.Sprintf("certs: random serial: %v", err)) // crypto/rand does not fail
	}
	return n
}
