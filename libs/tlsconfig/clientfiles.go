package tlsconfig

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// ClientFiles name the files of a TLS client: the CA bundle that verifies
// the server (empty: the system's roots), the client's certificate and key
// for mutual TLS (both or neither), and the name the server's certificate
// must carry (empty: the host dialled). Field names are those of the
// backends' config blocks (tls: {caFile, certFile, keyFile, serverName}).
type ClientFiles struct {
	CAFile     string `json:"caFile,omitempty" yaml:"caFile,omitempty"`
	CertFile   string `json:"certFile,omitempty" yaml:"certFile,omitempty"`
	KeyFile    string `json:"keyFile,omitempty" yaml:"keyFile,omitempty"`
	ServerName string `json:"serverName,omitempty" yaml:"serverName,omitempty"`
}

// Set reports whether any file or the server name is given: TLS is asked
// for.
func (f ClientFiles) Set() bool { return f != ClientFiles{} }

// Validate checks the combination without reading the files: a
// certificate needs its key and a key its certificate.
func (f ClientFiles) Validate() error {
	if (f.CertFile == "") != (f.KeyFile == "") {
		return errors.New("a client certificate needs both the certificate file and the key file")
	}
	return nil
}

// Config reads the files and returns the client configuration (TLS 1.2 at
// least). Errors name the file at fault.
func (f ClientFiles) Config() (*tls.Config, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: f.ServerName}
	if f.CAFile != "" {
		pool, err := certPool(f.CAFile)
		if err != nil {
			return nil, err
		}
		c.RootCAs = pool
	}
	if f.CertFile != "" {
		pair, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("client certificate %s and key %s: %w", f.CertFile, f.KeyFile, err)
		}
		c.Certificates = []tls.Certificate{pair}
	}
	return c, nil
}

// certPool reads a PEM bundle of CA certificates.
func certPool(path string) (*x509.CertPool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("CA file %s: no PEM certificate in it", path)
	}
	return pool, nil
}
