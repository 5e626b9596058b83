package stack

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is one run of a child process: its output lines are written to out
// with its name as a prefix. The process leads a process group of its
// own, and whatever else runs in that group is killed once it exits, so
// that a child killed with SIGKILL leaves nothing behind.
type proc struct {
	name    string
	cmd     *exec.Cmd
	started time.Time
	done    chan struct{}
	err     error // once done: cmd.Wait's

	// tail is the process's last output lines, for the error when it dies
	// at start.
	tailMu sync.Mutex
	tail   []string
}

// tailLines is how many output lines a proc keeps.
const tailLines = 8

// drainGrace bounds the wait for a dead child's output pipe to close (a
// process that left the child's group may hold it open).
const drainGrace = 2 * time.Second

func (p *proc) keep(line string) {
	p.tailMu.Lock()
	defer p.tailMu.Unlock()
	p.tail = append(p.tail, line)
	if len(p.tail) > tailLines {
		p.tail = p.tail[len(p.tail)-tailLines:]
	}
}

// lastOutput returns the process's last output lines.
func (p *proc) lastOutput() string {
	p.tailMu.Lock()
	defer p.tailMu.Unlock()
	return strings.Join(p.tail, "\n")
}

// lineWriter serializes whole lines from several processes onto one writer.
type lineWriter struct {
	mu  sync.Mutex
	out io.Writer
}

func (w *lineWriter) line(prefix string, b []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, _ = fmt.Fprintf(w.out, "%-12s %s\n", prefix, b)
}

// childEnv is devstack's environment without HERMOD_* variables: the
// children get their settings from devstack's flags, and a HERMOD_CONFIG
// (say) meant for devstack must not redirect a picker to a file.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(kv, "HERMOD_") || slices.Contains(secretEnv, name) {
			env = append(env, kv)
		}
	}
	return env
}

// start runs the process (with childEnv plus env); its stdout and stderr
// go to out line by line.
func start(name string, out *lineWriter, env []string, bin string, args ...string) (*proc, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = append(childEnv(), env...)
	// Its own process group: a Ctrl-C on the terminal reaches devstack,
	// which stops the children in order, and a child's group can be
	// signalled (and cleared) as a whole. On Linux the child is also
	// killed when devstack dies.
	cmd.SysProcAttr = sysProcAttr()
	// One pipe for stdout and stderr, read until every writer is gone:
	// os/exec's own pipes would close at Wait, which must not wait for
	// them (a killed child's descendants may hold them).
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	cmd.Stdout, cmd.Stderr = w, w
	err = cmd.Start()
	_ = w.Close() // the child has its copy
	if err != nil {
		_ = r.Close()
		return nil, fmt.Errorf("start %s (%s): %w", name, bin, err)
	}
	p := &proc{name: name, cmd: cmd, started: time.Now(), done: make(chan struct{})}
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			out.line("["+name+"]", sc.Bytes())
			p.keep(sc.Text())
		}
		_, _ = io.Copy(io.Discard, r) // past an overlong line: keep the child from blocking
	}()
	go func() {
		pid := cmd.Process.Pid
		// The leader exited, not yet reaped: its pid, the group's id, is
		// not reused until Wait, and the group can be cleared safely.
		unreaped := waitExited(pid)
		if unreaped {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
		p.err = cmd.Wait()
		if !unreaped {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
		t := time.NewTimer(drainGrace)
		select {
		case <-drained:
		case <-t.C:
		}
		t.Stop()
		_ = r.Close()
		<-drained
		close(p.done)
	}()
	return p, nil
}

// pid returns the process id.
func (p *proc) pid() int { return p.cmd.Process.Pid }

// signal sends sig to the process's group.
func (p *proc) signal(sig syscall.Signal) {
	_ = syscall.Kill(-p.pid(), sig)
}

// stop sends SIGTERM to the process's group and waits up to grace, then
// kills the group. A process that had already exited was reported then:
// stopping it is not an error.
func (p *proc) stop(ctx context.Context, grace time.Duration) error {
	select {
	case <-p.done:
		return nil
	default:
	}
	p.signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
		return p.exitErr()
	case <-t.C:
	case <-ctx.Done():
	}
	p.signal(syscall.SIGKILL)
	<-p.done
	return fmt.Errorf("%s did not stop within %s; killed", p.name, grace)
}

// exitErr is the process's exit error, nil for a clean exit or a stop by
// SIGTERM.
func (p *proc) exitErr() error {
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGTERM {
			return nil
		}
	}
	return p.err
}

// exitStatus says how the process ended: "exit status 0", "exit status 1",
// "signal: killed".
func (p *proc) exitStatus() string {
	if p.err == nil {
		return "exit status 0"
	}
	return p.err.Error()
}
