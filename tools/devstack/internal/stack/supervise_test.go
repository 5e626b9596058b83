package stack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hermod/hermod/tools/devstack/stackstate"
)

// A child killed with SIGKILL comes back on the same port after a
// backoff that doubles up to its cap (100, 200, 400, 400 ms, +-20%), its
// restarts counted and each exit logged with its status; after a healthy
// run of resetAfter the backoff starts over.
func TestRestartWithBackoff(t *testing.T) {
	pol := testPolicy
	pol.resetAfter = 1500 * time.Millisecond
	sup, logs := newTestSupervisor(t, pol, nil)
	c, err := sup.start(serveSpec(t, "svc"))
	if err != nil {
		t.Fatal(err)
	}
	if err := sup.awaitReady(context.Background(), 10*time.Second, c); err != nil {
		t.Fatal(err)
	}
	port := c.spec.ports["http"]
	kill := func(n int, want time.Duration) {
		t.Helper()
		before := c.snapshot()
		if err := syscall.Kill(before.PID, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		after := waitChild(t, c, 5*time.Second, "restarted and ready", func(sc stackstate.Child) bool { return sc.Restarts == n && sc.Ready() })
		if after.PID == before.PID || after.LastExit != "signal: killed" {
			t.Fatalf("restart %d: pid %d -> %d, last exit %q", n, before.PID, after.PID, after.LastExit)
		}
		if pid, err := answer(port); err != nil || pid != after.PID {
			t.Fatalf("restart %d: port %d answers %d, %v; want the new pid %d", n, port, pid, err, after.PID)
		}
		// the delay from the exit to the new start: the backoff +-20%, plus
		// the time to notice the exit and to start a process
		delay := after.LastStart.Sub(after.LastExitAt)
		lo, hi := time.Duration(float64(want)*0.8)-5*time.Millisecond, time.Duration(float64(want)*1.2)+300*time.Millisecond
		t.Logf("restart %d after %s (backoff %s)", n, delay.Round(time.Millisecond), want)
		if delay < lo || delay > hi {
			t.Errorf("restart %d came %s after the exit, want %s +-20%%", n, delay, want)
		}
	}
	for i, want := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 400 * time.Millisecond} {
		kill(i+1, want)
	}
	time.Sleep(pol.resetAfter + 100*time.Millisecond) // healthy that long: the backoff starts over
	kill(5, 100*time.Millisecond)

	log := logs.String()
	if n := strings.Count(log, `msg="child exited; restarting"`); n != 5 || !strings.Contains(log, `status="signal: killed"`) || !strings.Contains(log, "child=svc") {
		t.Errorf("%d restarts logged, want 5 with their exit status:\n%s", n, log)
	}
	if err := sup.err(); err != nil {
		t.Fatalf("the supervisor failed: %v", err)
	}
}

// The state file appears once the stack is ready and is rewritten on
// every change: the killed pod's entry loses its pid while it waits,
// then has the new one (in pids and pods too), always whole; a Ctrl-C
// stops every child and removes the file.
func TestStateFileFollowsRestarts(t *testing.T) {
	for _, kv := range testChildVars { // the stack's children inherit them
		name, value, _ := strings.Cut(kv, "=")
		t.Setenv(name, value)
	}
	dir := t.TempDir()
	stateFile := filepath.Join(dir, "state.json")
	s := &stack{o: Options{StateFile: stateFile, BinDir: dir}, log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		out: &lineWriter{out: io.Discard}, state: stackstate.State{Pool: "p", PIDs: map[string]int{}}}
	pol := testPolicy
	pol.minBackoff, pol.maxBackoff = 500*time.Millisecond, 500*time.Millisecond
	s.sup = newSupervisor(s.log, s.out, pol, s.publish)
	t.Cleanup(func() { s.sup.stopAll(context.Background()) })

	addr := freeAddr(t)
	_, port, _ := strings.Cut(addr, ":")
	c, err := s.launch("vllm-sim-0", stackstate.RolePod, podAddrs(addr, 7000), os.Args[0], "--port", port)
	if err != nil {
		t.Fatal(err)
	}
	s.state.Pods = append(s.state.Pods, stackstate.Pod{Name: "vllm-sim-0", Address: addr, PID: c.pid()})
	if err := s.waitReady(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stateFile); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a state file before the stack is ready: %v", err)
	}
	if err := s.writeState(); err != nil {
		t.Fatal(err)
	}
	read := func() (*stackstate.State, stackstate.Child) {
		t.Helper()
		st, err := stackstate.Read(stateFile)
		if err != nil {
			t.Fatal(err)
		}
		sc, ok := st.Child("vllm-sim-0")
		if !ok {
			t.Fatalf("no vllm-sim-0 in %+v", st.Children)
		}
		return st, sc
	}
	st, first := read()
	if !first.Ready() || first.Role != stackstate.RolePod || first.PID != c.pid() || st.PIDs["vllm-sim-0"] != first.PID || st.Pods[0].PID != first.PID ||
		first.Ports["http"] == 0 || first.Ports["kv"] != 7000 || first.Ports["kv_replay"] != 7001 || first.Probe != "http://"+addr+"/health" ||
		first.Restarts != 0 || first.LastStart.IsZero() || !first.Restart || len(st.ChildrenOf(stackstate.RolePod)) != 1 {
		t.Fatalf("first state: %+v %+v", first, st)
	}

	// Readers never see half a file while it is rewritten.
	stop := make(chan struct{})
	var readers sync.WaitGroup
	readers.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			b, err := os.ReadFile(stateFile)
			var st stackstate.State
			if err == nil && json.Unmarshal(b, &st) != nil {
				t.Errorf("a half-written state file: %q", b)
				return
			}
		}
	})
	defer func() { close(stop); readers.Wait() }()

	if err := syscall.Kill(first.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitState := func(what string, ok func(*stackstate.State, stackstate.Child) bool) (*stackstate.State, stackstate.Child) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			st, sc := read()
			if ok(st, sc) {
				return st, sc
			}
			if time.Now().After(deadline) {
				t.Fatalf("the state file never showed %s: %+v", what, sc)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	st, down := waitState("the pod down", func(_ *stackstate.State, sc stackstate.Child) bool { return sc.State == stackstate.ChildBackoff })
	if _, ok := st.PIDs["vllm-sim-0"]; ok || down.PID != 0 || st.Pods[0].PID != 0 || down.LastExit != "signal: killed" || down.LastExitAt.IsZero() {
		t.Fatalf("while down: %+v pids %v pods %+v", down, st.PIDs, st.Pods)
	}
	st, back := waitState("the pod restarted and ready", func(_ *stackstate.State, sc stackstate.Child) bool { return sc.Restarts == 1 && sc.Ready() })
	if back.PID == first.PID || st.PIDs["vllm-sim-0"] != back.PID || st.Pods[0].PID != back.PID || !back.LastStart.After(first.LastStart) ||
		back.ReadySince.Before(back.LastStart) {
		t.Fatalf("after the restart: %+v pids %v pods %+v", back, st.PIDs, st.Pods)
	}

	// Ctrl-C: wait returns, shutdown stops the child and removes the file.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.wait(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.shutdown(); err != nil {
		t.Fatal(err)
	}
	waitGone(t, 2*time.Second, back.PID)
	if _, err := os.Stat(stateFile); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the state file outlived the stack: %v", err)
	}
}

// A child that cannot start stops the stack: at once when its binary
// does not run, after the policy's start attempts when it exits before
// ever being ready, with its own output in the error. A child that was
// ready once and then fails to start again is only retried (CrashLoop)
// until it comes back.
func TestStopOnStartFailure(t *testing.T) {
	t.Run("binary", func(t *testing.T) {
		sup, _ := newTestSupervisor(t, testPolicy, nil)
		_, err := sup.start(childSpec{name: "ghost", role: "test", bin: filepath.Join(t.TempDir(), "no-such-binary")})
		if err == nil || !strings.Contains(err.Error(), "start ghost") {
			t.Fatalf("a missing binary: %v", err)
		}
		if len(sup.snapshot()) != 0 {
			t.Fatalf("a child that never ran is listed: %+v", sup.snapshot())
		}
	})
	t.Run("exits before ready", func(t *testing.T) {
		sup, logs := newTestSupervisor(t, testPolicy, nil)
		s := &stack{sup: sup}
		c, err := sup.start(serveSpec(t, "broken", "--fail"))
		if err != nil {
			t.Fatal(err)
		}
		began := time.Now()
		err = sup.awaitReady(context.Background(), 10*time.Second, c)
		if err == nil || !strings.Contains(err.Error(), "broken exited while starting, 3 times in a row") ||
			!strings.Contains(err.Error(), "exit status 3") || !strings.Contains(err.Error(), "boom: this child cannot start") {
			t.Fatalf("a child that never starts: %v", err)
		}
		t.Logf("failed after %s: %v", time.Since(began).Round(time.Millisecond), err)
		if took := time.Since(began); took > 3*time.Second {
			t.Errorf("took %s to give up", took)
		}
		if werr := s.wait(context.Background()); werr == nil || werr.Error() != err.Error() {
			t.Errorf("the stack's wait returned %v", werr)
		}
		if sc := c.snapshot(); sc.State != stackstate.ChildFailed || sc.PID != 0 || sc.Restarts != 2 {
			t.Errorf("a failed child: %+v", sc)
		}
		if n := strings.Count(logs.String(), "child exited; restarting"); n != 2 {
			t.Errorf("%d restarts logged, want 2:\n%s", n, logs.String())
		}
	})
	t.Run("crash loop after ready", func(t *testing.T) {
		sup, _ := newTestSupervisor(t, testPolicy, nil)
		marker := filepath.Join(t.TempDir(), "broken")
		c, err := sup.start(serveSpec(t, "flaky", "--fail-if-exists", marker))
		if err != nil {
			t.Fatal(err)
		}
		if err := sup.awaitReady(context.Background(), 10*time.Second, c); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(marker, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Kill(c.pid(), syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		sc := waitChild(t, c, 10*time.Second, "crash-looping", func(sc stackstate.Child) bool {
			return sc.Restarts >= 5 && sc.State == stackstate.ChildBackoff
		})
		if sup.err() != nil || sc.LastExit != "exit status 3" {
			t.Fatalf("a child that was ready once stopped the stack: %v, %+v", sup.err(), sc)
		}
		if err := os.Remove(marker); err != nil {
			t.Fatal(err)
		}
		waitChild(t, c, 5*time.Second, "back", func(sc stackstate.Child) bool { return sc.Ready() })
	})
}

// Stopping the stack (Ctrl-C) stops every child, the last started first:
// one in its backoff at once, one that ignores SIGTERM by SIGKILL after
// the grace, and every process in their groups.
func TestStopKillsAll(t *testing.T) {
	pol := testPolicy
	pol.stopGrace = 300 * time.Millisecond
	pol.minBackoff, pol.maxBackoff = time.Hour, time.Hour // a killed child waits until the stop
	sup, _ := newTestSupervisor(t, pol, nil)
	pidfile := filepath.Join(t.TempDir(), "grandchild")
	var children []*child
	for _, spec := range []childSpec{
		serveSpec(t, "parent", "--grandchild-pidfile", pidfile),
		serveSpec(t, "stubborn", "--ignore-term"),
		serveSpec(t, "waiting"),
	} {
		c, err := sup.start(spec)
		if err != nil {
			t.Fatal(err)
		}
		children = append(children, c)
	}
	if err := sup.awaitReady(context.Background(), 10*time.Second, children...); err != nil {
		t.Fatal(err)
	}
	pids := []int{readPID(t, pidfile)}
	for _, c := range children {
		pids = append(pids, c.pid())
	}
	if err := syscall.Kill(children[2].pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitChild(t, children[2], 5*time.Second, "backing off", func(sc stackstate.Child) bool { return sc.State == stackstate.ChildBackoff })

	began := time.Now()
	errs := sup.stopAll(context.Background())
	took := time.Since(began)
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "stubborn did not stop within 300ms; killed") {
		t.Errorf("stop errors: %v", errs)
	}
	if took > 2*time.Second {
		t.Errorf("stopping took %s", took)
	}
	waitGone(t, 2*time.Second, pids...)
	for _, c := range children {
		if sc := c.snapshot(); sc.State != stackstate.ChildExited || sc.PID != 0 {
			t.Errorf("after the stop: %+v", sc)
		}
	}
}

// kill -9 of a child leaves no orphan: what it started in its process
// group is killed with it, and the restarted child starts its own.
func TestKill9LeavesNoOrphan(t *testing.T) {
	sup, _ := newTestSupervisor(t, testPolicy, nil)
	pidfile := filepath.Join(t.TempDir(), "grandchild")
	c, err := sup.start(serveSpec(t, "parent", "--grandchild-pidfile", pidfile))
	if err != nil {
		t.Fatal(err)
	}
	if err := sup.awaitReady(context.Background(), 10*time.Second, c); err != nil {
		t.Fatal(err)
	}
	grandchild, parent := readPID(t, pidfile), c.pid()
	if err := os.Remove(pidfile); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(parent, syscall.SIGKILL); err != nil { // the child alone, not its group
		t.Fatal(err)
	}
	waitGone(t, 2*time.Second, grandchild)
	waitChild(t, c, 5*time.Second, "restarted", func(sc stackstate.Child) bool { return sc.Restarts == 1 && sc.Ready() })
	if next := readPID(t, pidfile); next == grandchild || !alive(next) {
		t.Fatalf("the restarted child's own process: %d (the killed one's was %d)", next, grandchild)
	}
}

// --no-restart leaves a child down once it exited after being ready.
func TestNoRestart(t *testing.T) {
	sup, logs := newTestSupervisor(t, testPolicy, nil)
	spec := serveSpec(t, "picker-1")
	spec.noRestart = restartSet{"vllm-sim-0", "picker-1"}.excludes("picker-1", "picker")
	c, err := sup.start(spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := sup.awaitReady(context.Background(), 10*time.Second, c); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(c.pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitChild(t, c, 5*time.Second, "exited", func(sc stackstate.Child) bool { return sc.State == stackstate.ChildExited })
	time.Sleep(3 * testPolicy.minBackoff)
	if sc := c.snapshot(); sc.Restarts != 0 || sc.PID != 0 || sc.Restart || !strings.Contains(logs.String(), "not restarted (--no-restart)") {
		t.Fatalf("a --no-restart child: %+v\n%s", sc, logs.String())
	}
	for _, tc := range []struct {
		set        restartSet
		name, role string
		want       bool
	}{
		{restartSet{"pod"}, "vllm-sim-3", "pod", true},
		{restartSet{"picker-1"}, "picker-0", "picker", false},
		{restartSet{"picker-1"}, "picker-1", "picker", true},
		{nil, "gateway", "gateway", false},
	} {
		if got := tc.set.excludes(tc.name, tc.role); got != tc.want {
			t.Errorf("%v excludes %s (%s) = %v", tc.set, tc.name, tc.role, got)
		}
	}
}

// A ready child that stops answering (SIGSTOP: alive, hung) fails its
// liveness probe and is killed after the policy's failures in a row, then
// restarts and serves again; one that answers is left alone.
func TestLivenessProbeRestartsAHungChild(t *testing.T) {
	pol := testPolicy
	pol.liveTimeout = 200 * time.Millisecond
	sup, logs := newTestSupervisor(t, pol, nil)
	spec := serveSpec(t, "svc")
	port := spec.ports["http"]
	spec.live = httpProbe(fmt.Sprintf("http://127.0.0.1:%d/health", port))
	c, err := sup.start(spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := sup.awaitReady(context.Background(), 10*time.Second, c); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * pol.liveEvery) // answering: probed and left alone
	before := c.snapshot()
	if before.Restarts != 0 || !before.Ready() || before.Liveness == "" {
		t.Fatalf("an answering child: %+v", before)
	}
	if err := syscall.Kill(before.PID, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	after := waitChild(t, c, 10*time.Second, "restarted and ready", func(sc stackstate.Child) bool { return sc.Restarts == 1 && sc.Ready() })
	took := after.LastExitAt.Sub(stopped)
	t.Logf("hung child killed %s after it stopped answering; last exit %q", took.Round(time.Millisecond), after.LastExit)
	// 3 probes, each up to its timeout, 50 ms apart
	if minimum := 2 * pol.liveEvery; took < minimum {
		t.Errorf("killed %s after it hung, before %d failed probes could have run", took, pol.liveFailures)
	}
	if after.PID == before.PID || !strings.Contains(after.LastExit, "signal: killed") || !strings.Contains(after.LastExit, "liveness probe failed 3 times") {
		t.Errorf("pid %d -> %d, last exit %q", before.PID, after.PID, after.LastExit)
	}
	if pid, err := answer(port); err != nil || pid != after.PID {
		t.Errorf("port %d answers %d, %v; want the new pid %d", port, pid, err, after.PID)
	}
	if log := logs.String(); strings.Count(log, `msg="child failed its liveness probe"`) != 3 {
		t.Errorf("want 3 failed probes logged:\n%s", log)
	}
}
