package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hermod/hermod/tools/devstack/stackstate"
)

// The devstack supervises its children as a kubelet would: one of two
// pickers and a pod killed with SIGKILL under light load come back on
// the same ports with new pids in the state file (their restarts counted)
// and serve again; nothing else restarts and the stack keeps running.
func TestDevstackRestartsKilledChildren(t *testing.T) {
	s := startStack(t, "--pods", "2", "--slow-pods", "0", "--pickers", "2", "--speed", "10")
	ev := s.follow(t)
	st := readState(t, s.stateFile)
	for _, c := range st.Children {
		if !c.Ready() || c.Restarts != 0 || c.LastStart.IsZero() || len(c.Ports) == 0 || c.Probe == "" || st.PIDs[c.Name] != c.PID {
			t.Fatalf("child at start: %+v (pids %v)", c, st.PIDs)
		}
	}
	if n := len(st.ChildrenOf(stackstate.RolePicker)); n != 2 {
		t.Fatalf("%d pickers in the state file", n)
	}
	victims := map[string]stackstate.Child{}
	for _, name := range []string{"picker-1", "vllm-sim-0"} {
		c, ok := st.Child(name)
		if !ok {
			t.Fatalf("no %s in the state file: %+v", name, st.Children)
		}
		victims[name] = c
	}

	load := startLightLoad(s, 4)
	time.Sleep(time.Second)
	killed := time.Now()
	for _, c := range victims {
		if err := syscall.Kill(c.PID, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
	}
	client := &http.Client{Timeout: time.Second}
	for name, old := range victims {
		var back stackstate.Child
		waitFor(t, 30*time.Second, name+" restarted and ready", func() bool {
			st, err := stackstate.Read(s.stateFile)
			if err != nil {
				return false
			}
			back, _ = st.Child(name)
			return back.Restarts == 1 && back.Ready() && back.PID != old.PID && st.PIDs[name] == back.PID
		})
		t.Logf("%s: pid %d -> %d, ready %s after the kill (last exit %q)", name, old.PID, back.PID, back.ReadySince.Sub(killed).Round(time.Millisecond), back.LastExit)
		if back.LastExit != "signal: killed" || fmt.Sprint(back.Ports) != fmt.Sprint(old.Ports) {
			t.Errorf("%s after its restart: %+v", name, back)
		}
		resp, err := client.Get(back.Probe) // on the same port as before
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s's probe %s after its restart: %v %v", name, back.Probe, resp, err)
		}
		_ = resp.Body.Close()
	}
	time.Sleep(time.Second) // the load goes on a moment with both back
	results := load.stop()

	// Serving again: the restarted pod answers requests and the restarted
	// picker decides some.
	pod := st.Pods[0]
	servedByPod, decidedByPicker := false, false
	for i := 0; i < 200 && (!servedByPod || !decidedByPicker); i++ {
		r := s.send(context.Background(), "/v1/completions", fmt.Sprintf(`{"model":%q,"prompt":"after the restarts %d","max_tokens":2}`, s.state.Model, i), false)
		if !r.ok() {
			t.Fatalf("request %d after the restarts: %d %v %s", i, r.status, r.err, r.body)
		}
		servedByPod = servedByPod || r.servedBy == pod.Address
		waitFor(t, 5*time.Second, "the decision of "+r.requestID, func() bool { return ev.decision(r.requestID) != nil })
		decidedByPicker = decidedByPicker || ev.decision(r.requestID).GetReplica() == "picker-1"
	}
	if !servedByPod || !decidedByPicker {
		t.Fatalf("after the restarts: served by %s: %v, decided by picker-1: %v", pod.Name, servedByPod, decidedByPicker)
	}

	failed, after := 0, 0
	for _, r := range results {
		if !r.ok() {
			failed++
			if r.at.After(killed.Add(10 * time.Second)) {
				after++
			}
		}
	}
	t.Logf("light load: %d requests, %d failed around the kills", len(results), failed)
	if after > 0 {
		t.Errorf("%d requests failed more than 10s after the kills", after)
	}

	select {
	case err := <-s.done:
		t.Fatalf("hermod-devstack exited: %v\n%s", err, tail(s.logs.String(), 40))
	default:
	}
	st = readState(t, s.stateFile)
	for _, c := range st.Children {
		if _, victim := victims[c.Name]; !victim && (c.Restarts != 0 || !c.Ready()) {
			t.Errorf("%s restarted too: %+v", c.Name, c)
		}
	}
	logs := s.logs.String()
	for name := range victims {
		if !strings.Contains(logs, "child exited; restarting") || !strings.Contains(logs, "child="+name) {
			t.Errorf("no restart of %s logged:\n%s", name, grepLines(logs, "child=", 20))
		}
	}
	if !strings.Contains(logs, `status="signal: killed"`) {
		t.Errorf("the restarts were logged without their exit status:\n%s", grepLines(logs, "child=", 20))
	}
}

func readState(t *testing.T, path string) *stackstate.State {
	t.Helper()
	st, err := stackstate.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// lightLoad is a few clients sending small requests one after another.
type lightLoad struct {
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	mu      sync.Mutex
	results []timedResult
}

type timedResult struct {
	result
	at time.Time
}

func startLightLoad(s *devstack, clients int) *lightLoad {
	ctx, cancel := context.WithCancel(context.Background())
	l := &lightLoad{cancel: cancel}
	for c := range clients {
		l.wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				path, body, stream := mixedRequest(s.state.Model, c*100000+i)
				r := s.send(ctx, path, body, stream)
				if ctx.Err() != nil {
					return
				}
				l.mu.Lock()
				l.results = append(l.results, timedResult{r, time.Now()})
				l.mu.Unlock()
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
	return l
}

func (l *lightLoad) stop() []timedResult {
	l.cancel()
	l.wg.Wait()
	return l.results
}
