// Package tlsconfig builds TLS configurations from files (a CA bundle, a
// certificate and its key) and keeps them current: the files are
// re-checked on a short interval and, when they change (cert-manager
// rewriting them in place, kubelet swapping a Secret volume's ..data
// symlink), the new material is loaded and used by every new handshake
// without a restart. A failed load (a half-written pair, a missing file)
// keeps the last good material and is retried on the next check.
//
// Server configurations choose the certificate and the client CAs per
// handshake (GetConfigForClient); client configurations choose the client
// certificate per handshake (GetClientCertificate) and carry the CA bundle
// current when they are made, so a dialer that asks for a configuration
// per connection (as Hermod's gRPC credentials do) sees a rotated CA too.
// TLS 1.2 is the minimum; 1.3 is negotiated whenever the peer has it.
package tlsconfig

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// DefaultInterval is how often the files are checked for changes.
const DefaultInterval = 5 * time.Second

// ClientAuth is what a server asks of its clients.
type ClientAuth string

// Client-auth modes.
const (
	// ClientAuthNone: no client certificate is asked for.
	ClientAuthNone ClientAuth = "none"
	// ClientAuthOptional: a client certificate is verified if one is
	// given; clients without one are accepted (as anonymous).
	ClientAuthOptional ClientAuth = "optional"
	// ClientAuthRequire: every client must present a certificate the CA
	// bundle verifies.
	ClientAuthRequire ClientAuth = "require"
)

// ParseClientAuth parses none, optional or require ("" is none).
func ParseClientAuth(s string) (ClientAuth, error) {
	switch ClientAuth(s) {
	case "", ClientAuthNone:
		return ClientAuthNone, nil
	case ClientAuthOptional, ClientAuthRequire:
		return ClientAuth(s), nil
	}
	return "", fmt.Errorf("client auth %q: want none, optional or require", s)
}

func (c ClientAuth) tls() tls.ClientAuthType {
	switch c {
	case ClientAuthOptional:
		return tls.VerifyClientCertIfGiven
	case ClientAuthRequire:
		return tls.RequireAndVerifyClientCert
	}
	return tls.NoClientCert
}

// Options say where the material is and how it is used.
type Options struct {
	// Name names the configuration in logs and in the metrics' name label
	// ("grpc").
	Name string
	// CAFile is the PEM CA bundle: the roots clients verify servers with,
	// and the CAs servers verify client certificates with. Empty: clients
	// use the system roots; servers cannot verify clients.
	CAFile string
	// CertFile and KeyFile are a PEM certificate (chain) and its key:
	// the server's certificate, and the certificate clients present.
	// Both or neither.
	CertFile, KeyFile string
	// ClientAuth is what a server asks of its clients (default none).
	ClientAuth ClientAuth
	// ServerName, when set, is the name clients verify the server's
	// certificate for instead of the dialed host.
	ServerName string
	// Interval is how often the files are checked (default
	// DefaultInterval).
	Interval time.Duration
	// Logger (default slog.Default()) and Registerer (nil: no metrics).
	Logger     *slog.Logger
	Registerer prometheus.Registerer
}

// Errors callers may branch on.
var (
	ErrNoCertificate = errors.New("no certificate configured")
)

// Source holds the current material and keeps it current until Close.
type Source struct {
	o       Options
	cur     atomic.Pointer[generation]
	metrics *metrics
	lastErr string // of the last failed check (logged once)

	checkMu sync.Mutex // one check at a time
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
}

// New loads the material (an error names the file at fault) and starts
// checking the files for changes until Close.
func New(o Options) (*Source, error) {
	if (o.CertFile == "") != (o.KeyFile == "") {
		return nil, fmt.Errorf("tls %s: a certificate file needs a key file and a key file a certificate file (cert %q, key %q)", o.Name, o.CertFile, o.KeyFile)
	}
	if o.ClientAuth == "" {
		o.ClientAuth = ClientAuthNone
	}
	if _, err := ParseClientAuth(string(o.ClientAuth)); err != nil {
		return nil, fmt.Errorf("tls %s: %w", o.Name, err)
	}
	if o.ClientAuth != ClientAuthNone && (o.CAFile == "" || o.CertFile == "") {
		return nil, fmt.Errorf("tls %s: client auth %s needs a CA file (to verify clients) and a certificate and key (to serve)", o.Name, o.ClientAuth)
	}
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	m, err := load(o)
	if err != nil {
		return nil, err
	}
	s := &Source{o: o, metrics: newMetrics(o.Registerer, o.Name), stop: make(chan struct{}), done: make(chan struct{})}
	s.cur.Store(m)
	s.metrics.observe(m)
	if m.cert != nil {
		o.Logger.Info("tls material loaded", "tls", o.Name, "cert_file", o.CertFile, "not_after", m.cert.Leaf.NotAfter, "client_auth", string(o.ClientAuth))
	}
	go s.watch()
	return s, nil
}

// Close stops checking the files and waits for the check in progress.
func (s *Source) Close() {
	s.once.Do(func() { close(s.stop) })
	<-s.done
}

// ServerConfig is a server configuration: every handshake uses the
// certificate and the client CAs current then. ErrNoCertificate: no
// certificate is configured.
func (s *Source) ServerConfig() (*tls.Config, error) {
	if s.cur.Load().cert == nil {
		return nil, fmt.Errorf("tls %s: serve: %w (a certificate and key file)", s.o.Name, ErrNoCertificate)
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return s.cur.Load().server, nil
		},
	}, nil
}

// HTTPServerConfig is ServerConfig for an HTTPS server: HTTP/2 and
// HTTP/1.1 offered by ALPN (the per-handshake config is otherwise
// ALPN-less, and net/http would serve HTTP/1.1 only).
func (s *Source) HTTPServerConfig() (*tls.Config, error) {
	c, err := s.ServerConfig()
	if err != nil {
		return nil, err
	}
	protos := []string{"h2", "http/1.1"}
	c.NextProtos = protos
	c.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		cur := s.cur.Load().server.Clone()
		cur.NextProtos = protos
		return cur, nil
	}
	return c, nil
}

// ClientConfig is a client configuration with the CA bundle current now
// (nil: the system roots) and the server-name override; the client
// certificate, if one is configured, is the one current at each handshake.
func (s *Source) ClientConfig() *tls.Config {
	m := s.cur.Load()
	c := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: m.pool, ServerName: s.o.ServerName}
	if m.cert != nil {
		c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return s.cur.Load().cert, nil
		}
	}
	return c
}

// ClientAuth is the configured client-auth mode.
func (s *Source) ClientAuth() ClientAuth { return s.o.ClientAuth }

// Reload checks the files now and loads them if they changed; the error
// is the failed load's (the previous material stays).
func (s *Source) Reload() error {
	s.checkMu.Lock()
	defer s.checkMu.Unlock()
	return s.check()
}

func (s *Source) watch() {
	defer close(s.done)
	t := time.NewTicker(s.o.Interval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			_ = s.Reload() // logged and counted
		}
	}
}

// check loads the files if their stamps changed. It runs under checkMu.
func (s *Source) check() error {
	old := s.cur.Load()
	defer func() { s.metrics.observe(s.cur.Load()) }()
	st, err := stampFiles(s.o)
	if err == nil && st.same(old.stamp) {
		return nil
	}
	var m *generation
	if err == nil {
		m, err = load(s.o)
	}
	if err != nil {
		s.metrics.reloaded("error")
		if msg := err.Error(); msg != s.lastErr {
			s.lastErr = msg
			s.o.Logger.Warn("tls material changed but did not load; keeping the previous", "tls", s.o.Name, "error", err)
		}
		return err
	}
	s.lastErr = ""
	if m.sum == old.sum {
		s.cur.Store(m) // same content, new stamps: nothing to announce
		return nil
	}
	s.cur.Store(m)
	s.metrics.reloaded("ok")
	attrs := []any{"tls", s.o.Name}
	if m.cert != nil {
		attrs = append(attrs, "not_after", m.cert.Leaf.NotAfter)
	}
	s.o.Logger.Info("tls material reloaded", attrs...)
	return nil
}
