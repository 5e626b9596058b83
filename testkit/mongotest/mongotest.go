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
	proc *childproc.Process
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
	s := &Server{tb: tb, bin: bin, dir: tb.TempDir()}
	s.port = childproc.OnFreePort(tb, "mongotest", func(port int) error {
		s.port = port
		return s.start()
	})
	tb.Cleanup(s.Stop)
	return s
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return childproc.Addr(s.port) }

// URI is the server's mongodb:// URI.
func (s *Server) URI() string { return "mongodb://" + s.Addr() + "/" }

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
	cmd := exec.Command(s.bin, "--listen", s.Addr(), "--dir", s.dir)
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
		if _, err := os.Stat(built); err == nil {
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
