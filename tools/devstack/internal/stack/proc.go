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

// proc is one child process whose output lines are written to out with its
// name as a prefix.
type proc struct {
	name string
	core bool // the stack stops when a core process dies
	cmd  *exec.Cmd
	done chan struct{}
	err  error // once done
	wg   sync.WaitGroup

	// tail is the process's last output lines, for the error when it dies
	// at start.
	tailMu sync.Mutex
	tail   []string
}

// tailLines is how many output lines a proc keeps.
const tailLines = 8

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

// start runs the process; its stdout and stderr go to out line by line.
func start(name string, core bool, out *lineWriter, bin string, args ...string) (*proc, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = childEnv()
	// Its own process group: a Ctrl-C on the terminal reaches devstack, which
	// stops the children in order.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s (%s): %w", name, bin, err)
	}
	p := &proc{name: name, core: core, cmd: cmd, done: make(chan struct{})}
	for _, r := range []io.Reader{stdout, stderr} {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			sc := bufio.NewScanner(r)
			sc.Buffer(make([]byte, 64<<10), 1<<20)
			for sc.Scan() {
				out.line("["+name+"]", sc.Bytes())
				p.keep(sc.Text())
			}
		}()
	}
	go func() {
		p.wg.Wait() // the pipes must be drained before Wait closes them
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// pid returns the process id.
func (p *proc) pid() int { return p.cmd.Process.Pid }

// stop sends SIGTERM and waits up to grace, then kills. A process that
// had already exited was reported then: stopping it is not an error.
func (p *proc) stop(ctx context.Context, grace time.Duration) error {
	select {
	case <-p.done:
		return nil
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
		return p.exitErr()
	case <-t.C:
	case <-ctx.Done():
	}
	_ = p.cmd.Process.Kill()
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
