package tlsconfig

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/hermod/hermod/testkit/certs"
)

var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

// pki is a CA and the files of one server certificate in a directory.
type pki struct {
	ca              *certs.CA
	dir             string
	caFile          string
	certFile, keyFF string
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	ca, err := certs.NewCA("tlsconfig test CA")
	if err != nil {
		t.Fatal(err)
	}
	p := &pki{ca: ca, dir: t.TempDir()}
	p.caFile = filepath.Join(p.dir, "ca.crt")
	if err := ca.WriteCA(p.caFile); err != nil {
		t.Fatal(err)
	}
	p.issue(t)
	return p
}

// issue writes a new server certificate (a new serial) over the files.
func (p *pki) issue(t *testing.T) *big.Int {
	t.Helper()
	kp, err := p.ca.Server("picker")
	if err != nil {
		t.Fatal(err)
	}
	f, err := kp.Write(p.dir, "tls")
	if err != nil {
		t.Fatal(err)
	}
	p.certFile, p.keyFF = f.Cert, f.Key
	return kp.Cert.SerialNumber
}

func (p *pki) source(t *testing.T, o Options) *Source {
	t.Helper()
	if o.CAFile == "" {
		o.CAFile, o.CertFile, o.KeyFile = p.caFile, p.certFile, p.keyFF
	}
	o.Name, o.Logger = "test", quietLog
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// serve accepts TLS connections with cfg and completes their handshakes
// until the test ends.
func serve(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	l, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { _ = l.Close(); <-done })
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_ = c.SetDeadline(time.Now().Add(5 * time.Second))
			_ = c.(*tls.Conn).Handshake()
			_, _ = c.Write([]byte{1}) // lets the client see a refusal
			_ = c.Close()
		}
	}()
	return l.Addr().String()
}

// servedSerial dials addr and returns the serial of the certificate the
// server presents.
func servedSerial(t *testing.T, addr string, cfg *tls.Config) *big.Int {
	t.Helper()
	d := tls.Dialer{Config: cfg}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	return c.(*tls.Conn).ConnectionState().PeerCertificates[0].SerialNumber
}

func TestNewErrorsNameTheFile(t *testing.T) {
	p := newPKI(t)
	missing := filepath.Join(p.dir, "missing.pem")
	notPEM := filepath.Join(p.dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		o    Options
		want string
	}{
		{"missing CA", Options{CAFile: missing}, "missing.pem"},
		{"CA not PEM", Options{CAFile: notPEM}, "CA file " + notPEM},
		{"missing key", Options{CertFile: p.certFile, KeyFile: missing}, "missing.pem"},
		{"cert without key", Options{CertFile: p.certFile}, "needs a key file"},
		{"key not PEM", Options{CertFile: p.certFile, KeyFile: notPEM}, notPEM},
		{"client auth without CA", Options{CertFile: p.certFile, KeyFile: p.keyFF, ClientAuth: ClientAuthRequire}, "needs a CA file"},
		{"bad client auth", Options{CAFile: p.caFile, ClientAuth: "sometimes"}, `"sometimes"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.o.Name = "test"
			s, err := New(c.o)
			if err == nil {
				s.Close()
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "tls test") {
				t.Fatalf("error %q does not name %q", err, c.want)
			}
		})
	}
	s := p.source(t, Options{CAFile: p.caFile})
	if _, err := s.ServerConfig(); !errors.Is(err, ErrNoCertificate) {
		t.Errorf("server config without a certificate: %v", err)
	}
}

// Files rewritten in place and a Secret volume's ..data symlink swap are
// picked up by the next handshake; a half-written pair keeps the last good
// material; the metrics follow.
func TestReloadRotatedFiles(t *testing.T) {
	p := newPKI(t)
	reg := prometheus.NewRegistry()
	// the Secret volume layout: tls.crt -> ..data/tls.crt, ..data -> ..v1
	vol := t.TempDir()
	link := func(version string) {
		for _, f := range []struct{ from, name string }{{p.certFile, "tls.crt"}, {p.keyFF, "tls.key"}, {p.caFile, "ca.crt"}} {
			data, err := os.ReadFile(f.from)
			if err != nil {
				t.Fatal(err)
			}
			_ = os.MkdirAll(filepath.Join(vol, version), 0o755)
			if err := os.WriteFile(filepath.Join(vol, version, f.name), data, 0o600); err != nil {
				t.Fatal(err)
			}
			_ = os.Symlink(filepath.Join("..data", f.name), filepath.Join(vol, f.name))
		}
		tmp := filepath.Join(vol, "..data_tmp")
		if err := os.Symlink(version, tmp); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(vol, "..data")); err != nil {
			t.Fatal(err)
		}
	}
	first := p.issue(t)
	link("..v1")
	s := p.source(t, Options{CAFile: filepath.Join(vol, "ca.crt"), CertFile: filepath.Join(vol, "tls.crt"), KeyFile: filepath.Join(vol, "tls.key"),
		Interval: time.Hour, Registerer: reg})
	srvCfg, err := s.ServerConfig()
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, srvCfg)
	client := &tls.Config{RootCAs: p.ca.Pool(), ServerName: "localhost", MinVersion: tls.VersionTLS12}
	if got := servedSerial(t, addr, client); got.Cmp(first) != 0 {
		t.Fatalf("served %v, want %v", got, first)
	}
	if v := testutil.ToFloat64(s.metrics.expiry); v < float64(certs.DefaultValidity/time.Second)-120 {
		t.Errorf("expiry gauge %v", v)
	}

	second := p.issue(t)
	link("..v2")
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	if got := servedSerial(t, addr, client); got.Cmp(second) != 0 {
		t.Fatalf("after the ..data swap: served %v, want %v", got, second)
	}

	// a certificate written without its key yet: kept the last good pair
	kp, err := p.ca.Server("picker")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(vol, "..v2", "tls.crt"), kp.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.Reload(); err == nil {
		t.Fatal("a certificate with another key loaded")
	}
	if got := servedSerial(t, addr, client); got.Cmp(second) != 0 {
		t.Fatalf("after a failed load: served %v, want %v", got, second)
	}
	// then the key arrives (in place)
	if err := os.WriteFile(filepath.Join(vol, "..v2", "tls.key"), kp.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	if got := servedSerial(t, addr, client); got.Cmp(kp.Cert.SerialNumber) != 0 {
		t.Fatalf("after an in-place rewrite: served %v, want %v", got, kp.Cert.SerialNumber)
	}
	if ok, bad := testutil.ToFloat64(s.metrics.reloads.WithLabelValues("test", "ok")), testutil.ToFloat64(s.metrics.reloads.WithLabelValues("test", "error")); ok != 2 || bad != 1 {
		t.Errorf("reloads ok %v error %v, want 2 and 1", ok, bad)
	}
	if err := s.Reload(); err != nil || testutil.ToFloat64(s.metrics.reloads.WithLabelValues("test", "ok")) != 2 {
		t.Errorf("an unchanged check counted as a reload: %v", err)
	}
}

// The watcher picks changes up on its own.
func TestWatchPicksUpChanges(t *testing.T) {
	p := newPKI(t)
	s := p.source(t, Options{Interval: 10 * time.Millisecond})
	srvCfg, err := s.ServerConfig()
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, srvCfg)
	client := &tls.Config{RootCAs: p.ca.Pool(), ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
	next := p.issue(t)
	deadline := time.Now().Add(5 * time.Second)
	for servedSerial(t, addr, client).Cmp(next) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the rotated certificate was not picked up")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Client auth modes: require refuses a client without a certificate,
// optional accepts it, both verify a given one; the client presents the
// current certificate and trusts the current CA bundle.
func TestClientAuthModes(t *testing.T) {
	p := newPKI(t)
	other, err := certs.NewCA("another CA")
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := other.Client("gateway")
	if err != nil {
		t.Fatal(err)
	}
	foreignTLS, err := foreign.TLS()
	if err != nil {
		t.Fatal(err)
	}
	client := p.source(t, Options{})
	for _, c := range []struct {
		mode                       ClientAuth
		none, mine, foreignRefused bool
	}{
		{ClientAuthNone, true, true, false},
		{ClientAuthOptional, true, true, true},
		{ClientAuthRequire, false, true, true},
	} {
		t.Run(string(c.mode), func(t *testing.T) {
			s := p.source(t, Options{ClientAuth: c.mode})
			cfg, err := s.ServerConfig()
			if err != nil {
				t.Fatal(err)
			}
			addr := serve(t, cfg)
			noCert := &tls.Config{RootCAs: p.ca.Pool(), ServerName: "localhost", MinVersion: tls.VersionTLS12}
			foreignCfg := noCert.Clone()
			// presented whatever CAs the server names (Certificates would
			// be withheld, as no issuer matches)
			foreignCfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &foreignTLS, nil }
			if ok := handshakes(addr, noCert); ok != c.none {
				t.Errorf("no certificate: accepted %v", ok)
			}
			if ok := handshakes(addr, client.ClientConfig()); ok != c.mine {
				t.Errorf("the CA's certificate: accepted %v", ok)
			}
			if ok := handshakes(addr, foreignCfg); ok == c.foreignRefused {
				t.Errorf("another CA's certificate: accepted %v", ok)
			}
		})
	}
	if cfg := client.ClientConfig(); cfg.RootCAs == nil || cfg.MinVersion != tls.VersionTLS12 {
		t.Errorf("client config %+v", cfg)
	}
}

// handshakes says whether the server accepted the connection: a TLS 1.3
// client learns of a refused certificate on its first read.
func handshakes(addr string, cfg *tls.Config) bool {
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return false
	}
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	_, err = c.Read(make([]byte, 1))
	return err == nil
}

func TestParseClientAuth(t *testing.T) {
	for in, want := range map[string]ClientAuth{"": ClientAuthNone, "none": ClientAuthNone, "optional": ClientAuthOptional, "require": ClientAuthRequire} {
		if got, err := ParseClientAuth(in); err != nil || got != want {
			t.Errorf("%q: %v %v", in, got, err)
		}
	}
	if _, err := ParseClientAuth("yes"); err == nil {
		t.Error("yes accepted")
	}
}

// An HTTPS server's config offers HTTP/2 and HTTP/1.1 by ALPN, and serves
// the certificate current at each handshake.
func TestHTTPServerConfig(t *testing.T) {
	p := newPKI(t)
	s := p.source(t, Options{Interval: time.Hour})
	cfg, err := s.HTTPServerConfig()
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, cfg)
	dial := func(protos ...string) (string, *big.Int) {
		t.Helper()
		d := tls.Dialer{Config: &tls.Config{RootCAs: p.ca.Pool(), ServerName: "localhost", MinVersion: tls.VersionTLS12, NextProtos: protos}}
		c, err := d.DialContext(t.Context(), "tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = c.Close() }()
		st := c.(*tls.Conn).ConnectionState()
		return st.NegotiatedProtocol, st.PeerCertificates[0].SerialNumber
	}
	if proto, _ := dial("h2", "http/1.1"); proto != "h2" {
		t.Fatalf("negotiated %q, want h2", proto)
	}
	if proto, _ := dial("http/1.1"); proto != "http/1.1" {
		t.Fatalf("negotiated %q, want http/1.1", proto)
	}
	serial := p.issue(t)
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	if proto, got := dial("h2"); proto != "h2" || got.Cmp(serial) != 0 {
		t.Fatalf("after a rotation: %q serving %v, want h2 serving %v", proto, got, serial)
	}
}
