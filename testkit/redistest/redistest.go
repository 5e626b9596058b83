// Package redistest runs a real redis-server for tests: on a free loopback
// port, without persistence, stopped when the test ends. Tests that need
// the server to go away and come back use Stop and Start.
package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/hermod/hermod/testkit/childproc"
)

// Server is a redis-server child process.
type Server struct {
	tb    testing.TB
	port  int
	extra []string
	tls   *TLS
	proc  *childproc.Process
}

// TLS are the files of a server that speaks TLS only (StartTLS): its
// certificate and key, and the CA that verifies clients' certificates
// (required of every client with AuthClients).
type TLS struct {
	CertFile, KeyFile, CAFile string
	AuthClients               bool
}

// Start runs a redis-server (skipping the test when the binary is
// missing: make deps installs it) and stops it when the test ends.
func Start(tb testing.TB) *Server {
	tb.Helper()
	return StartArgs(tb)
}

// StartArgs is Start with further redis-server arguments (a config file
// first, then "--name value" pairs): "--cluster-enabled", "yes", say.
func StartArgs(tb testing.TB, args ...string) *Server {
	tb.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		tb.Skip("redis-server is not installed (make deps installs it)")
	}
	return startServer(tb, &Server{tb: tb, extra: args})
}

// StartTLS is StartArgs for a server that speaks TLS only, on its port
// (redis-server's --tls-port; --port 0). Debian's redis-server is built
// with TLS.
func StartTLS(tb testing.TB, t TLS, args ...string) *Server {
	tb.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		tb.Skip("redis-server is not installed (make deps installs it)")
	}
	return startServer(tb, &Server{tb: tb, extra: args, tls: &t})
}

func startServer(tb testing.TB, s *Server) *Server {
	tb.Helper()
	s.port = childproc.OnFreePort(tb, "redis-server", func(port int) error {
		s.port = port
		return s.start()
	})
	tb.Cleanup(s.Stop)
	return s
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return childproc.Addr(s.port) }

// URL is the server's redis:// URL (rediss:// for a TLS server).
func (s *Server) URL() string {
	if s.tls != nil {
		return "rediss://" + s.Addr()
	}
	return "redis://" + s.Addr()
}

// Stop kills the server (its data goes with it).
func (s *Server) Stop() {
	if s.proc != nil {
		s.proc.Kill()
		s.proc = nil
	}
}

// Restart starts an empty server on the same port after Stop.
func (s *Server) Restart() {
	s.tb.Helper()
	if err := s.start(); err != nil {
		s.tb.Fatalf("redis-server restart: %v", err)
	}
}

func (s *Server) start() error {
	var args []string
	if len(s.extra) > 0 && !strings.HasPrefix(s.extra[0], "--") {
		args = append(args, s.extra[0]) // the config file comes first
	}
	ready := func() error { return ping(s.Addr()) }
	if s.tls != nil {
		auth := "no"
		if s.tls.AuthClients {
			auth = "yes"
		}
		args = append(args, "--port", "0", "--tls-port", strconv.Itoa(s.port), "--tls-cert-file", s.tls.CertFile,
			"--tls-key-file", s.tls.KeyFile, "--tls-ca-cert-file", s.tls.CAFile, "--tls-auth-clients", auth)
		ready = func() error { return childproc.Dials(s.Addr()) }
	} else {
		args = append(args, "--port", strconv.Itoa(s.port))
	}
	args = append(args, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--protected-mode", "no", "--loglevel", "warning")
	for _, a := range s.extra {
		if len(args) > 0 && a == args[0] {
			continue
		}
		args = append(args, a)
	}
	p, err := childproc.Start(exec.Command("redis-server", args...), ready, 10*time.Second)
	if err != nil {
		return err
	}
	s.proc = p
	return nil
}

// ping sends PING and expects +PONG.
func ping(addr string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	buf := make([]byte, 7)
	n, err := c.Read(buf)
	if err != nil {
		return err
	}
	if string(buf[:n]) != "+PONG\r\n" {
		return fmt.Errorf("PING answered %q", buf[:n])
	}
	return nil
}

// Client returns a valkey-go client of the server, closed when the test
// ends.
func (s *Server) Client(tb testing.TB) valkey.Client {
	tb.Helper()
	return Connect(tb, s.URL())
}

// Connect returns a valkey-go client of the server at url (redis:// or
// valkey://), without client-side caching, closed when the test ends.
func Connect(tb testing.TB, url string) valkey.Client {
	tb.Helper()
	opt, err := valkey.ParseURL(url)
	if err != nil {
		tb.Fatal(err)
	}
	opt.DisableCache = true
	c, err := valkey.NewClient(opt)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(c.Close)
	return c
}

// StartSentinel runs a Sentinel (redis-server --sentinel) watching master
// under name, with a quorum of one.
func StartSentinel(tb testing.TB, master *Server, name string) *Server {
	tb.Helper()
	conf := filepath.Join(tb.TempDir(), "sentinel.conf")
	body := fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d 1\nsentinel down-after-milliseconds %s 1000\n", name, master.port, name)
	if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
		tb.Fatal(err)
	}
	return StartArgs(tb, conf, "--sentinel", "--save", "")
}
