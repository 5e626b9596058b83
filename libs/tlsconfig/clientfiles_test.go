package tlsconfig

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermod/hermod/testkit/certs"
)

type material struct {
	ca                    string
	clientCert, clientKey string
	server                tls.Certificate
	caObj                 *certs.CA
}

func newMaterial(t *testing.T) material {
	t.Helper()
	dir := t.TempDir()
	ca, err := certs.NewCA("test CA")
	if err != nil {
		t.Fatal(err)
	}
	m := material{ca: filepath.Join(dir, "ca.crt"), caObj: ca}
	if err := ca.WriteCA(m.ca); err != nil {
		t.Fatal(err)
	}
	srv, err := ca.Server("etcd")
	if err != nil {
		t.Fatal(err)
	}
	if m.server, err = tls.X509KeyPair(srv.CertPEM, srv.KeyPEM); err != nil {
		t.Fatal(err)
	}
	cli, err := ca.Client("picker")
	if err != nil {
		t.Fatal(err)
	}
	f, err := cli.Write(dir, "client")
	if err != nil {
		t.Fatal(err)
	}
	m.clientCert, m.clientKey = f.Cert, f.Key
	return m
}

func TestClientFilesErrorsNameTheFile(t *testing.T) {
	m := newMaterial(t)
	notPEM := filepath.Join(t.TempDir(), "notpem")
	if err := os.WriteFile(notPEM, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		f      ClientFiles
		errHas string
	}{
		{"cert without key", ClientFiles{CertFile: m.clientCert}, "key file"},
		{"key without cert", ClientFiles{KeyFile: m.clientKey}, "certificate file"},
		{"missing CA", ClientFiles{CAFile: m.ca + ".missing"}, m.ca + ".missing"},
		{"CA not PEM", ClientFiles{CAFile: notPEM}, notPEM},
		{"key not matching", ClientFiles{CertFile: m.clientCert, KeyFile: notPEM}, notPEM},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tc.f.Config(); err == nil || !strings.Contains(err.Error(), tc.errHas) {
				t.Fatalf("err = %v, want one containing %q", err, tc.errHas)
			}
		})
	}
	if (ClientFiles{}).Set() || !(ClientFiles{ServerName: "x"}).Set() {
		t.Error("Set")
	}
}

// The configuration verifies the server with the CA and presents the
// client certificate to a server that requires one.
func TestClientFilesHandshake(t *testing.T) {
	m := newMaterial(t)
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
		Certificates: []tls.Certificate{m.server},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    m.caObj.Pool(),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_ = c.(*tls.Conn).Handshake()
			_, _ = c.Write([]byte("ok"))
			_ = c.Close()
		}
	}()
	dial := func(f ClientFiles) error {
		cfg, err := f.Config()
		if err != nil {
			return err
		}
		c, err := tls.Dial("tcp", l.Addr().String(), cfg)
		if err != nil {
			return err
		}
		defer func() { _ = c.Close() }()
		_, err = c.Read(make([]byte, 2))
		return err
	}
	if err := dial(ClientFiles{CAFile: m.ca, CertFile: m.clientCert, KeyFile: m.clientKey}); err != nil {
		t.Fatalf("with the CA and a client certificate: %v", err)
	}
	if err := dial(ClientFiles{CertFile: m.clientCert, KeyFile: m.clientKey}); err == nil {
		t.Error("the server's certificate was accepted without the CA")
	}
	if err := dial(ClientFiles{CAFile: m.ca}); err == nil {
		t.Error("the server accepted a client without a certificate")
	}
	if err := dial(ClientFiles{CAFile: m.ca, CertFile: m.clientCert, KeyFile: m.clientKey, ServerName: "elsewhere.example"}); err == nil {
		t.Error("a certificate for another name was accepted")
	}
}
