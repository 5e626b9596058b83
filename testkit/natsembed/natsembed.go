// Package natsembed runs a NATS server, with JetStream if asked, inside the
// process: the embedded default of devstack (`make run`) and the server of
// the tests (see bustest). The server listens on loopback by default and can
// be stopped and started again on the same port with the same store, so
// that tests can prove reconnect and replay behaviour.
package natsembed

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// DefaultHost is the address the server listens on when Options.Host is
// empty.
const DefaultHost = "127.0.0.1"

// readyTimeout bounds how long a server may take to accept connections.
const readyTimeout = 10 * time.Second

// Options configure an embedded server.
type Options struct {
	// Name is the server's name (default "hermod-nats").
	Name string
	// Host to listen on (default DefaultHost).
	Host string
	// Port to listen on; 0 picks a free one, which the server keeps across
	// Restart.
	Port int
	// JetStream enables JetStream.
	JetStream bool
	// StoreDir is the JetStream store directory; "" uses a new temporary
	// directory that Shutdown removes.
	StoreDir string
	// MaxMemory and MaxStore bound JetStream's memory and file storage in
	// bytes; 0 lets the server pick (a share of the machine's memory and
	// disk).
	MaxMemory, MaxStore int64
	// Logger receives the server's log; nil discards it. Server debug logs
	// are on when the logger is enabled at slog.LevelDebug.
	Logger *slog.Logger

	// TLS, when set, makes the server require TLS with this configuration;
	// with ClientAuth tls.RequireAndVerifyClientCert (and ClientCAs) it
	// verifies client certificates too.
	TLS *tls.Config
	// Users and NKeys turn on authentication by user and password and by
	// NKey; Token by token instead (nats-server takes a token or users,
	// not both).
	Users []*server.User
	NKeys []*server.NkeyUser
	Token string
	// Configure, when set, adjusts the server's options last: what the
	// fields above do not cover (operator mode's trusted operators and
	// account resolver, say).
	Configure func(*server.Options)
}

// Server is an embedded NATS server.
type Server struct {
	opts    server.Options // the options of the next start; Port is fixed after the first
	logger  *slog.Logger
	tempDir string // removed by Shutdown; "" if the store belongs to the caller

	mu  sync.Mutex
	srv *server.Server // nil while stopped
}

// Start starts a server and waits until it accepts connections.
func Start(o Options) (*Server, error) {
	s, err := newServer(o)
	if err != nil {
		return nil, err
	}
	if err := s.start(); err != nil {
		s.removeTempDir()
		return nil, err
	}
	return s, nil
}

// newServer applies o's defaults and builds a stopped Server (with its
// temporary store directory, if any).
func newServer(o Options) (*Server, error) {
	if o.Name == "" {
		o.Name = "hermod-nats"
	}
	if o.Host == "" {
		o.Host = DefaultHost
	}
	if o.Port < 0 {
		return nil, fmt.Errorf("start nats server: invalid port %d", o.Port)
	}
	s := &Server{logger: o.Logger}
	if o.JetStream && o.StoreDir == "" {
		dir, err := os.MkdirTemp("", "hermod-nats-")
		if err != nil {
			return nil, fmt.Errorf("start nats server: create store dir: %w", err)
		}
		s.tempDir, o.StoreDir = dir, dir
	}
	port := o.Port
	if port == 0 {
		port = server.RANDOM_PORT
	}
	s.opts = server.Options{
		ServerName:             o.Name,
		Host:                   o.Host,
		Port:                   port,
		JetStream:              o.JetStream,
		StoreDir:               o.StoreDir,
		JetStreamMaxMemory:     o.MaxMemory,
		JetStreamMaxStore:      o.MaxStore,
		NoSigs:                 true,
		NoLog:                  o.Logger == nil,
		DisableJetStreamBanner: true,
		Users:                  o.Users,
		Nkeys:                  o.NKeys,
		Authorization:          o.Token,
	}
	if o.TLS != nil {
		s.opts.TLS = true
		s.opts.TLSConfig = o.TLS
		s.opts.TLSVerify = o.TLS.ClientAuth == tls.RequireAndVerifyClientCert
		s.opts.TLSTimeout = 5 // seconds: handshakes under -race are slow
	}
	if o.Configure != nil {
		o.Configure(&s.opts)
	}
	return s, nil
}

// start starts the server with s.opts; s.mu is held or s is not shared yet.
func (s *Server) start() error {
	// The server only reports a port it cannot listen on once its
	// readiness wait times out: find out first.
	if s.opts.Port != server.RANDOM_PORT {
		if err := checkPortFree(s.opts.Host, s.opts.Port); err != nil {
			return fmt.Errorf("start nats server: %w", err)
		}
	}
	if s.opts.Cluster.Port > 0 {
		if err := checkPortFree(s.opts.Cluster.Host, s.opts.Cluster.Port); err != nil {
			return fmt.Errorf("start nats server %s: cluster port: %w", s.opts.ServerName, err)
		}
	}
	opts := s.opts // the server keeps and modifies its copy
	srv, err := server.NewServer(&opts)
	if err != nil {
		return fmt.Errorf("start nats server: %w", err)
	}
	if s.logger != nil {
		debug := s.logger.Enabled(context.Background(), slog.LevelDebug)
		srv.SetLoggerV2(slogLogger{s.logger}, debug, false, false)
	}
	srv.Start()
	if !srv.ReadyForConnections(readyTimeout) {
		srv.Shutdown()
		srv.WaitForShutdown()
		return fmt.Errorf("start nats server on %s:%d: not ready after %s", s.opts.Host, s.opts.Port, readyTimeout)
	}
	if addr, ok := srv.Addr().(*net.TCPAddr); ok && s.opts.Port == server.RANDOM_PORT {
		s.opts.Port = addr.Port // keep the port across Restart
	}
	s.srv = srv
	return nil
}

// checkPortFree says whether host:port can be listened on.
func checkPortFree(host string, port int) error {
	l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("listen on %s:%d: %w", host, port, err)
	}
	return l.Close()
}

// Name returns the server's name (in a cluster, unique per node).
func (s *Server) Name() string { return s.opts.ServerName }

// ClientURL returns the URL clients connect to, nats://host:port. It stays
// the same across Stop and Restart.
func (s *Server) ClientURL() string {
	return "nats://" + net.JoinHostPort(s.opts.Host, strconv.Itoa(s.opts.Port))
}

// StoreDir returns the JetStream store directory ("" without JetStream).
func (s *Server) StoreDir() string { return s.opts.StoreDir }

// Running says whether the server is running (started and not stopped).
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.srv != nil
}

// NATSServer returns the running nats-server, or nil while stopped; for
// monitoring and tests.
func (s *Server) NATSServer() *server.Server {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.srv
}

// Stop shuts the server down and waits for it, keeping its port and store so
// that Restart brings it back with the same streams. Clients see a
// disconnect. Stopping a stopped server does nothing.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopLocked()
}

func (s *Server) stopLocked() {
	if s.srv == nil {
		return
	}
	s.srv.Shutdown()
	s.srv.WaitForShutdown()
	s.srv = nil
}

// Restart stops the server if it runs and starts it again on the same port
// with the same store. It retries for a while when the port is not free yet.
func (s *Server) Restart() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopLocked()
	var err error
	for range 20 {
		if err = s.start(); err == nil {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("restart nats server: %w", err)
}

// Shutdown stops the server, waits for it, and removes the store if Start
// created it. Later calls do nothing.
func (s *Server) Shutdown() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopLocked()
	s.removeTempDir()
}

func (s *Server) removeTempDir() {
	if s.tempDir == "" {
		return
	}
	if err := os.RemoveAll(s.tempDir); err != nil && s.logger != nil {
		s.logger.Warn("remove nats store dir", "store_dir", s.tempDir, "error", err)
	}
	s.tempDir = ""
}
