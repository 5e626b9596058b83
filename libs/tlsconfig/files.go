package tlsconfig

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"time"
)

// generation is one load of the files.
type generation struct {
	cert   *tls.Certificate // nil: no certificate configured
	pool   *x509.CertPool   // nil: no CA file
	server *tls.Config      // what a server handshake uses; nil without cert
	stamp  stamp
	sum    [sha256.Size]byte // of the files' contents
}

// load reads and parses the files named in o.
func load(o Options) (*generation, error) {
	st, err := stampFiles(o)
	if err != nil {
		return nil, err
	}
	m := &generation{stamp: st}
	h := sha256.New()
	if o.CAFile != "" {
		data, err := readFile(o, "CA file", o.CAFile)
		if err != nil {
			return nil, err
		}
		h.Write(data)
		m.pool = x509.NewCertPool()
		if !m.pool.AppendCertsFromPEM(data) {
			return nil, fmt.Errorf("tls %s: CA file %s: no PEM certificate in it", o.Name, o.CAFile)
		}
	}
	if o.CertFile != "" {
		certPEM, err := readFile(o, "certificate file", o.CertFile)
		if err != nil {
			return nil, err
		}
		keyPEM, err := readFile(o, "key file", o.KeyFile)
		if err != nil {
			return nil, err
		}
		h.Write(certPEM)
		h.Write(keyPEM)
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return nil, fmt.Errorf("tls %s: certificate file %s with key file %s: %w", o.Name, o.CertFile, o.KeyFile, err)
		}
		if cert.Leaf == nil { // set by X509KeyPair since Go 1.23
			if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
				return nil, fmt.Errorf("tls %s: certificate file %s: %w", o.Name, o.CertFile, err)
			}
		}
		m.cert = &cert
		m.server = &tls.Config{
			MinVersion:   tls.VersionTLS12,
			Certificates: []tls.Certificate{cert},
			ClientAuth:   o.ClientAuth.tls(),
			ClientCAs:    m.pool,
		}
	}
	h.Sum(m.sum[:0])
	return m, nil
}

func readFile(o Options, what, path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tls %s: %s: %w", o.Name, what, err) // the PathError names the file
	}
	return data, nil
}

// stamp identifies the versions of the files: a file that is replaced
// (a rename, a symlink swap) is another file; one rewritten in place has
// another modification time or size.
type stamp []os.FileInfo

func stampFiles(o Options) (stamp, error) {
	var st stamp
	for _, f := range []struct{ what, path string }{{"CA file", o.CAFile}, {"certificate file", o.CertFile}, {"key file", o.KeyFile}} {
		if f.path == "" {
			continue
		}
		fi, err := os.Stat(f.path) // follows symlinks: ..data swaps show
		if err != nil {
			return nil, fmt.Errorf("tls %s: %s: %w", o.Name, f.what, err)
		}
		st = append(st, fi)
	}
	return st, nil
}

func (s stamp) same(o stamp) bool {
	if len(s) != len(o) {
		return false
	}
	for i := range s {
		if !os.SameFile(s[i], o[i]) || !s[i].ModTime().Equal(o[i].ModTime()) || s[i].Size() != o[i].Size() {
			return false
		}
	}
	return true
}

// untilExpiry is the time left on the certificate (0 without one).
func (m *generation) untilExpiry(now time.Time) (time.Duration, bool) {
	if m.cert == nil {
		return 0, false
	}
	return m.cert.Leaf.NotAfter.Sub(now), true
}
