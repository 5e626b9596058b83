// Package childproc runs a test's server as a child process: on a free
// loopback port, ready once it answers, killed on demand and when the
// test ends.
package childproc

import (
	"bytes"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"
)

// Process is a started child process.
type Process struct {
	cmd     *exec.Cmd
	done    chan struct{} // closed when the process has exited
	exitErr error
	out     *Output
}

// Start starts cmd (its output collected for errors) and polls ready until
// it succeeds. When the process exits first, or ready still fails after
// within, the process is gone and the error says why.
func Start(cmd *exec.Cmd, ready func() error, within time.Duration) (*Process, error) {
	p := &Process{cmd: cmd, done: make(chan struct{}), out: &Output{}}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() { p.exitErr = cmd.Wait(); close(p.done) }()
	deadline := time.Now().Add(within)
	for {
		select {
		case <-p.done:
			return nil, fmt.Errorf("%s exited: %w: %s", cmd.Path, p.exitErr, p.out.String())
		default:
		}
		err := ready()
		if err == nil {
			return p, nil
		}
		if time.Now().After(deadline) {
			p.Kill()
			return nil, fmt.Errorf("%s not ready within %s: %w", cmd.Path, within, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Output is what the process has written so far (stdout and stderr).
func (p *Process) Output() string { return p.out.String() }

// Kill kills the process and waits for it to exit.
func (p *Process) Kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// OnFreePort calls start with a free loopback port until it succeeds (a
// port can be taken between the pick and the bind), five times at most,
// and returns the port; it fails the test when every try fails.
func OnFreePort(tb testing.TB, what string, start func(port int) error) int {
	tb.Helper()
	var lastErr error
	for range 5 {
		port := FreePort(tb)
		if lastErr = start(port); lastErr == nil {
			return port
		}
	}
	tb.Fatalf("%s: %v", what, lastErr)
	return 0
}

// FreePort returns a loopback TCP port nobody listens on now.
func FreePort(tb testing.TB) int {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}

// Addr is the loopback host:port of port.
func Addr(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

// Dials reports whether a TCP connection to addr opens.
func Dials(addr string) error {
	c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return err
	}
	return c.Close()
}

// Output collects what is written to it (a process's output, a logger's
// lines) for a test to read while the writers go on: safe for concurrent
// use.
type Output struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write implements io.Writer.
func (b *Output) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what was written so far.
func (b *Output) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
