package certs

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"os"
	"path/filepath"
	"testing"
)

// A server certificate verifies for the loopback names and carries the
// service's identity; a client certificate verifies for client auth; the
// files load as a pair and the key is private.
func TestIssueAndWrite(t *testing.T) {
	ca, err := NewCA("hermod test CA")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := ca.Server("picker")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"127.0.0.1", "::1", "localhost"} {
		if _, err := srv.Cert.Verify(x509.VerifyOptions{DNSName: name, Roots: ca.Pool()}); err != nil {
			t.Errorf("server certificate for %s: %v", name, err)
		}
	}
	if len(srv.Cert.URIs) != 1 || srv.Cert.URIs[0].String() != "spiffe://hermod/picker" || srv.Cert.Subject.CommonName != "hermod-picker" {
		t.Errorf("server identity %v %s", srv.Cert.URIs, srv.Cert.Subject.CommonName)
	}
	cli, err := ca.Client("gateway")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Cert.Verify(x509.VerifyOptions{Roots: ca.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Error(err)
	}
	dir := t.TempDir()
	f, err := cli.Write(dir, "gateway")
	if err != nil {
		t.Fatal(err)
	}
	if err := ca.WriteCA(filepath.Join(dir, "ca.crt")); err != nil {
		t.Fatal(err)
	}
	if _, err := tls.LoadX509KeyPair(f.Cert, f.Key); err != nil {
		t.Error(err)
	}
	if fi, err := os.Stat(f.Key); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %v %v", fi, err)
	}
	if _, err := cli.TLS(); err != nil {
		t.Error(err)
	}
}

// A given subject replaces the identity's (kube-apiserver reads the CN as
// the user and the O as the groups); the identity URI stays.
func TestIssueSubject(t *testing.T) {
	ca, err := NewCA("hermod test CA")
	if err != nil {
		t.Fatal(err)
	}
	kp, err := ca.Issue(Leaf{Service: "collector", Client: true, Subject: pkix.Name{CommonName: "admin", Organization: []string{"system:masters"}}})
	if err != nil {
		t.Fatal(err)
	}
	if s := kp.Cert.Subject; s.CommonName != "admin" || len(s.Organization) != 1 || s.Organization[0] != "system:masters" {
		t.Errorf("subject %v", s)
	}
	if len(kp.Cert.URIs) != 1 || kp.Cert.URIs[0].String() != "spiffe://hermod/collector" {
		t.Errorf("identity %v", kp.Cert.URIs)
	}
}
