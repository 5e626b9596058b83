// Package mongotest runs a real MongoDB wire-protocol server for tests:
// FerretDB (SQLite storage) as a child process (tools/ferretdb's
// hermod-mongotest) on a free loopback port, with its data in the test's
// temporary directory. Stop kills it; Start brings it back on the same
// port with the same data, as a restarted MongoDB would come back.
//
// The binary is $HERMOD_MONGOTEST_BIN, else bin/hermod-mongotest at the
// repository root, built there on first use (make binaries builds it too).
package mongotest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hermod/hermod/testkit/childproc"
)

// Server is a hermod-mongotest child process.
type Server struct {
	tb   testing.TB
	bin  string
	dir  string
	port int
	tls  *TLS
	proc *childproc.Process
}

// TLS are the files of a server that speaks TLS only (RunTLS): its
// certificate and key and, when CAFile is set, the CA every client's
// certificate must be signed by (FerretDB then requires one).
//
// FerretDB v1 embedded has no authentication of its own (it accepts any
// user name and password): tests of credentials can only show that they
// are sent.
type TLS struct {
	CertFile, KeyFile, CAFile string
}

// Run starts a server and stops it when the test ends. It skips the test
// under -short.
func Run(tb testing.TB) *Server {
	tb.Helper()
	if testing.Short() {
		tb.Skip("needs a MongoDB wire-protocol server (skipped with -short)")
	}
	bin, err := binary()
	if err != nil {
		tb.Fatalf("mongotest: %v", err)
	}
	return runServer(tb, &Server{tb: tb, bin: bin, dir: tb.TempDir()})
}

// RunTLS is Run for a server that speaks TLS only.
func RunTLS(tb testing.TB, t TLS) *Server {
	tb.Helper()
	if testing.Short() {
		tb.Skip("needs a MongoDB wire-protocol server (skipped with -short)")
	}
	bin, err := binary()
	if err != nil {
		tb.Fatalf("mongotest: %v", err)
	}
	return runServer(tb, &Server{tb: tb, bin: bin, dir: tb.TempDir(), tls: &t})
}

func runServer(tb testing.TB, s *Server) *Server {
	tb.Helper()
	s.port = childproc.OnFreePort(tb, "mongotest", func(port int) error {
		s.port = port
		return s.start()
	})
	tb.Cleanup(s.Stop)
	return s
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return childproc.Addr(s.port) }

// URI is the server's mongodb:// URI (with tls=true for a TLS server).
func (s *Server) URI() string {
	if s.tls != nil {
		return "mongodb://" + s.Addr() + "/?tls=true"
	}
	return "mongodb://" + s.Addr() + "/"
}

// Stop kills the server; its data stays for Start.
func (s *Server) Stop() {
	if s.proc != nil {
		s.proc.Kill()
		s.proc = nil
	}
}

// Start brings a stopped server back on the same port with its data.
func (s *Server) Start() {
	s.tb.Helper()
	if s.proc != nil {
		return
	}
	if err := s.start(); err != nil {
		s.tb.Fatalf("mongotest restart: %v", err)
	}
}

func (s *Server) start() error {
	args := []string{"--listen", s.Addr(), "--dir", s.dir}
	if s.tls != nil {
		args = append(args, "--tls-cert-file", s.tls.CertFile, "--tls-key-file", s.tls.KeyFile, "--tls-ca-file", s.tls.CAFile)
	}
	cmd := exec.Command(s.bin, args...)
	p, err := childproc.Start(cmd, func() error { return childproc.Dials(s.Addr()) }, 30*time.Second)
	if err != nil {
		return err
	}
	s.proc = p
	return nil
}

var (
	buildOnce sync.Once
	built     string
	buildErr  error
)

// binary finds or builds hermod-mongotest.
func binary() (string, error) {
	if p := os.Getenv("HERMOD_MONGOTEST_BIN"); p != "" {
		return p, nil
	}
	buildOnce.Do(func() {
		_, file, _, ok := runtime.Caller(0)
		if !ok {
			buildErr = fmt.Errorf("cannot locate the repository: set HERMOD_MONGOTEST_BIN")
			return
		}
		root := filepath.Join(filepath.Dir(file), "..", "..")
		built = filepath.Join(root, "bin", "hermod-mongotest")
		if fi, err := os.Stat(built); err == nil && !sourceNewer(filepath.Join(root, "tools", "ferretdb"), fi.ModTime()) {
			return
		}
		// Built to a temporary name and renamed: test binaries of several
		// packages may build it at once.
		if err := os.MkdirAll(filepath.Dir(built), 0o755); err != nil {
			buildErr = err
			return
		}
		tmp := built + ".tmp" + strconv.Itoa(os.Getpid())
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "go", "build", "-o", tmp, "./cmd/hermod-mongotest")
		cmd.Dir = filepath.Join(root, "tools", "ferretdb")
		cmd.Env = append(os.Environ(), "GOWORK=off", "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("build hermod-mongotest: %w: %s", err, out)
			return
		}
		buildErr = os.Rename(tmp, built)
	})
	return built, buildErr
}

// sourceNewer says whether the command's source or module files changed
// after t: a binary built before then lacks flags the tests use.
func sourceNewer(moduleDir string, t time.Time) bool {
	for _, f := range []string{"go.mod", "go.sum", filepath.Join("cmd", "hermod-mongotest", "main.go")} {
		if fi, err := os.Stat(filepath.Join(moduleDir, f)); err == nil && fi.ModTime().After(t) {
			return true
		}
	}
	return false
}
