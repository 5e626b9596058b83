package stack

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hermod/hermod/tools/devstack/stackstate"
)

// testChildEnv makes the test binary a tiny child process (testChild):
// the supervisor's tests run it as their children.
const testChildEnv = "STACKTEST_CHILD"

// testChild is a child process: it serves HTTP on 127.0.0.1:--port
// (every path answers its pid; 503 until --ready-after has passed) until
// SIGTERM, or fails at start (--fail, or --fail-if-exists FILE when FILE
// exists). --grandchild-pidfile starts a `sleep` in its process group
// and writes its pid there; --ignore-term ignores SIGTERM.
func testChild(args []string) int {
	fs := flag.NewFlagSet("child", flag.ContinueOnError)
	port := fs.Int("port", 0, "")
	readyAfter := fs.Duration("ready-after", 0, "")
	fail := fs.Bool("fail", false, "")
	failIf := fs.String("fail-if-exists", "", "")
	grandchild := fs.String("grandchild-pidfile", "", "")
	ignoreTerm := fs.Bool("ignore-term", false, "")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *fail {
		fmt.Println("boom: this child cannot start")
		return 3
	}
	if *failIf != "" {
		if _, err := os.Stat(*failIf); err == nil {
			fmt.Println("boom:", *failIf, "exists")
			return 3
		}
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM)
	if *grandchild != "" {
		cmd := exec.Command("sleep", "300")
		if err := cmd.Start(); err != nil {
			fmt.Println(err)
			return 4
		}
		if err := os.WriteFile(*grandchild, []byte(strconv.Itoa(cmd.Process.Pid)), 0o600); err != nil {
			fmt.Println(err)
			return 4
		}
	}
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", *port))
	if err != nil {
		fmt.Println(err)
		return 5
	}
	started := time.Now()
	srv := &http.Server{ReadHeaderTimeout: time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if time.Since(started) < *readyAfter {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_, _ = fmt.Fprint(w, os.Getpid())
	})}
	go func() { _ = srv.Serve(l) }()
	fmt.Println("serving on", l.Addr())
	for range sigs {
		if !*ignoreTerm {
			return 0
		}
		fmt.Println("ignoring SIGTERM")
	}
	return 0
}

// testChildVars make a process a testChild; under -race, one that exits
// does so at once (not after the race detector's default second).
var testChildVars = []string{testChildEnv + "=1", "GORACE=atexit_sleep_ms=0"}

// testPolicy is a fast restart policy: 100 ms doubling to 400 ms.
var testPolicy = restartPolicy{
	minBackoff:    100 * time.Millisecond,
	maxBackoff:    400 * time.Millisecond,
	resetAfter:    time.Hour,
	startAttempts: 3,
	probeEvery:    10 * time.Millisecond,
	probeTimeout:  time.Second,
	liveEvery:     50 * time.Millisecond,
	liveTimeout:   time.Second,
	liveFailures:  3,
	stopGrace:     2 * time.Second,
}

// syncBuffer is a bytes.Buffer safe for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// newTestSupervisor returns a supervisor whose children are stopped when
// the test ends, and its log.
func newTestSupervisor(t *testing.T, pol restartPolicy, changed func()) (*supervisor, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{}
	sup := newSupervisor(slog.New(slog.NewTextHandler(logs, nil)), &lineWriter{out: testOut()}, pol, changed)
	t.Cleanup(func() { sup.stopAll(context.Background()) })
	return sup, logs
}

// freeAddr returns a loopback address nobody listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String()
}

// serveSpec is a testChild serving on a free port, ready once it
// answers.
func serveSpec(t *testing.T, name string, args ...string) childSpec {
	t.Helper()
	addr := freeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	return childSpec{name: name, role: "test", bin: os.Args[0], args: append([]string{"--port", port}, args...),
		env: testChildVars, ports: portsOf(map[string]string{"http": addr}), probe: httpProbe("http://" + addr + "/ready")}
}

// waitChild polls c's state until ok holds.
func waitChild(t *testing.T, c *child, within time.Duration, what string, ok func(stackstate.Child) bool) stackstate.Child {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		sc := c.snapshot()
		if ok(sc) {
			return sc
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not %s within %s: %+v", c.spec.name, what, within, sc)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// answer is the pid a testChild on port answers with.
func answer(port int) (int, error) {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/", port))
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(string(b))
}

// alive reports whether process pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if errors.Is(err, os.ErrNotExist) {
		return false
	}
	if err == nil {
		// pid (comm) STATE ...: the comm may hold spaces and parentheses
		if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) {
			return b[i+2] != 'Z'
		}
	}
	return syscall.Kill(pid, 0) == nil
}

// waitGone waits until none of pids is alive.
func waitGone(t *testing.T, within time.Duration, pids ...int) {
	t.Helper()
	deadline := time.Now().Add(within)
	for _, pid := range pids {
		for alive(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("process %d still alive after %s", pid, within)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// readPID reads a pid file, waiting for it to be written.
func readPID(t *testing.T, path string) int {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, err := os.ReadFile(path)
		if err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
				return pid
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no pid in %s: %v", path, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// testOut receives the children's output: stderr under -v.
func testOut() io.Writer {
	if testing.Verbose() {
		return os.Stderr
	}
	return io.Discard
}
